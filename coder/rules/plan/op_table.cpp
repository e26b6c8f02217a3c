#include "coder/rules/plan/op_table.hpp"

#include <set>
#include <unordered_map>

namespace ks::rules {

namespace {

constexpr op_class E = op_class::elementwise;
constexpr shape_rule B = shape_rule::broadcast;

op_info ew(std::string_view name, std::string_view expr = {}, int inputs = 0) { return {name, E, B, expr, inputs}; }
// An expression that calls the fast-math helpers (KS_EXP, KS_DIV).
op_info ew_fast(std::string_view name, std::string_view expr) { return {name, E, B, expr, 0, true}; }
op_info row(std::string_view name, op_class c, shape_rule s) { return {name, c, s}; }

}  // namespace

const std::vector<op_info>& op_table() {
  static const std::vector<op_info> table = {
      // Elementwise, one operand.
      ew("aten::relu", "fmaxf({x}, 0.0f)"),
      ew_fast("aten::sigmoid", "KS_DIV(1.0f, 1.0f + KS_EXP(-{x}))"),
      ew("aten::tanh", "tanhf({x})"),
      ew_fast("aten::exp", "KS_EXP({x})"),
      ew("aten::log", "logf({x})"),
      ew("aten::neg", "-{x}"),
      ew("aten::abs", "fabsf({x})"),
      ew("aten::sqrt", "sqrtf({x})"),
      ew("aten::rsqrt", "rsqrtf({x})"),
      ew_fast("aten::silu", "KS_DIV({x}, 1.0f + KS_EXP(-{x}))"),
      ew("aten::sin", "sinf({x})"),
      ew("aten::cos", "cosf({x})"),
      ew("aten::tan", "tanf({x})"),
      ew("aten::atan", "atanf({x})"),
      ew("aten::sinh", "sinhf({x})"),
      ew("aten::cosh", "coshf({x})"),
      ew("aten::erf", "erff({x})"),
      ew("aten::erfc", "erfcf({x})"),
      ew("aten::log1p", "log1pf({x})"),
      ew("aten::expm1", "expm1f({x})"),
      ew("aten::exp2", "exp2f({x})"),
      ew("aten::log2", "log2f({x})"),
      ew("aten::log10", "log10f({x})"),
      ew("aten::reciprocal", "1.0f / {x}"),
      ew("aten::square", "{x} * {x}"),
      ew("aten::floor", "floorf({x})"),
      ew("aten::ceil", "ceilf({x})"),
      ew("aten::trunc", "truncf({x})"),
      ew("aten::sign", "(float)(({x} > 0.0f) - ({x} < 0.0f))"),
      // Times 1/6 rather than an IEEE division (a subroutine with a slow path): within
      // an ulp of ATen's x / 6, and the kernel stays at memory speed.
      ew("aten::hardsigmoid", "fminf(fmaxf({x} * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f)"),
      ew("aten::hardswish", "{x} * fminf(fmaxf({x} + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f)"),
      ew("aten::relu6", "fminf(fmaxf({x}, 0.0f), 6.0f)"),
      ew("aten::mish", "{x} * tanhf({x} > 20.0f ? {x} : log1pf(expf({x})))"),
      ew("aten::selu", "1.0507009873554805f * ({x} > 0.0f ? {x} : 1.6732632423543772f * expm1f({x}))"),
      ew("aten::log_sigmoid", "fminf({x}, 0.0f) - log1pf(expf(-fabsf({x})))"),
      ew("aten::softsign", "{x} / (1.0f + fabsf({x}))"),
      // Elementwise, one operand and constant arguments.
      ew("aten::logit"),  // no eps only
      ew("aten::gelu"),   // approximate "none" or "tanh"
      ew("aten::leaky_relu", "{x} > 0.0f ? {x} : {x} * {1=0.01}"),
      ew("aten::hardtanh", "fminf(fmaxf({x}, {1=-1}), {2=1})"),
      ew("aten::elu", "{x} > 0.0f ? {2=1} * {x} : {2=1} * {1=1} * expm1f({x} * {3=1})"),
      ew("aten::celu", "fmaxf({x}, 0.0f) + fminf(0.0f, {1=1} * expm1f({x} / {1=1}))"),
      ew("aten::softplus", "{x} * {1=1} > {2=20} ? {x} : log1pf(expf({x} * {1=1})) / {1=1}"),
      ew("aten::threshold", "{x} > {1=0} ? {x} : {2=0}"),
      ew("aten::hardshrink", "fabsf({x}) > {1=0.5} ? {x} : 0.0f"),
      ew("aten::softshrink", "{x} > {1=0.5} ? {x} - {1=0.5} : ({x} < -{1=0.5} ? {x} + {1=0.5} : 0.0f)"),
      ew("aten::dropout"),  // the identity in eval mode (or p = 0)
      ew("aten::feature_dropout"),
      ew("aten::alpha_dropout"),
      ew("aten::contiguous", "{x}"),
      ew("aten::clone", "{x}"),
      ew("aten::detach", "{x}"),
      ew("aten::to", "{x}"),
      ew("aten::type_as", "{x}"),
      ew("aten::expand_as", "{x}"),
      ew("aten::expand", "{x}"),
      // Elementwise, two or three operands.
      ew("aten::clamp"),  // either bound may be None
      ew("aten::clip"),
      ew("aten::clamp_min", "fmaxf({x}, {1})"),
      ew("aten::clamp_max", "fminf({x}, {1})"),
      ew("aten::pow"),  // small constant exponents as products
      ew("aten::add"),  // alpha
      ew("aten::sub"),
      ew("aten::subtract"),
      ew("aten::rsub"),
      ew("aten::mul", "{x} * {1}"),
      ew("aten::multiply", "{x} * {1}"),
      // Division stays IEEE: KS_DIV (__fdividef) is wrong for huge divisors.
      ew("aten::div"),  // rounding mode
      ew("aten::divide"),
      ew("aten::true_divide"),
      ew("aten::maximum", "fmaxf({x}, {1})"),
      ew("aten::minimum", "fminf({x}, {1})"),
      ew("aten::atan2", "atan2f({x}, {1})"),
      // where(condition, self, other), masked_fill(self, mask, value): the condition or
      // mask is a bool operand (read as 0.0f or 1.0f); the other two tensors or scalars,
      // the one picked passed through untouched (NaN included).
      ew("aten::where", "({x} != 0.0f ? {1} : {2})", 3),
      ew("aten::masked_fill", "({1} != 0.0f ? {2} : {x})", 3),
      // ATen's: 0 where x is 0 (unless y is NaN), else x * log(y).
      ew("aten::xlogy", "(({x}) == 0.0f && ({1}) == ({1}) ? 0.0f : ({x}) * logf({1}))"),
      // Reductions and normalisations over adjacent dims (op_specs.cpp reads them).
      row("aten::sum", op_class::reduction, shape_rule::reduce),
      row("aten::mean", op_class::reduction, shape_rule::reduce),
      row("aten::amax", op_class::reduction, shape_rule::reduce),
      row("aten::amin", op_class::reduction, shape_rule::reduce),
      row("aten::max", op_class::reduction, shape_rule::reduce),
      row("aten::min", op_class::reduction, shape_rule::reduce),
      row("aten::logsumexp", op_class::reduction, shape_rule::reduce),
      row("aten::softmax", op_class::reduction, shape_rule::reduce),
      row("aten::log_softmax", op_class::reduction, shape_rule::reduce),
      row("aten::layer_norm", op_class::reduction, shape_rule::reduce),
      row("aten::var", op_class::reduction, shape_rule::reduce),
      row("aten::std", op_class::reduction, shape_rule::reduce),
      row("aten::norm", op_class::reduction, shape_rule::reduce),
      row("aten::linalg_vector_norm", op_class::reduction, shape_rule::reduce),
      row("aten::group_norm", op_class::reduction, shape_rule::reduce),
      row("aten::instance_norm", op_class::reduction, shape_rule::reduce),
      row("aten::argmax", op_class::reduction, shape_rule::reduce),
      row("aten::argmin", op_class::reduction, shape_rule::reduce),
      row("aten::batch_norm", op_class::reduction, shape_rule::reduce),
      // Scans along one dim.
      row("aten::cumsum", op_class::scan, shape_rule::same),
      row("aten::cumprod", op_class::scan, shape_rule::same),
      // Pools.
      row("aten::max_pool1d", op_class::pool, shape_rule::window),
      row("aten::max_pool2d", op_class::pool, shape_rule::window),
      row("aten::max_pool3d", op_class::pool, shape_rule::window),
      row("aten::avg_pool1d", op_class::pool, shape_rule::window),
      row("aten::avg_pool2d", op_class::pool, shape_rule::window),
      row("aten::avg_pool3d", op_class::pool, shape_rule::window),
      // Float products: the library template runs them; 3xTF32 (split_tf32.hpp) and
      // the matrix-vector rewrite (sum_of_product.hpp) take them.
      row("aten::matmul", op_class::product, shape_rule::library),
      row("aten::mm", op_class::product, shape_rule::library),
      row("aten::bmm", op_class::product, shape_rule::library),
      row("aten::addmm", op_class::product, shape_rule::library),
      row("aten::linear", op_class::product, shape_rule::library),
      // Convolutions, whose third argument is the bias (conv_bias.hpp; aten::_convolution
      // is what a scripted module's convolution can be recorded as). The library template
      // runs conv2d and its channels-last form (conv_layout.hpp); the others are fallbacks.
      row("aten::conv2d", op_class::convolution, shape_rule::library),
      row("ks::conv2d_nhwc", op_class::convolution, shape_rule::library),
      row("aten::conv1d", op_class::convolution, shape_rule::none),
      row("aten::conv3d", op_class::convolution, shape_rule::none),
      row("aten::conv_transpose1d", op_class::convolution, shape_rule::none),
      row("aten::conv_transpose2d", op_class::convolution, shape_rule::none),
      row("aten::conv_transpose3d", op_class::convolution, shape_rule::none),
      row("aten::_convolution", op_class::convolution, shape_rule::none),
      row("aten::convolution", op_class::convolution, shape_rule::none),
      // Nodes that compute nothing a kernel needs: lists and sizes are read from the
      // graph's values when an op uses them.
      row("prim::ListConstruct", op_class::meta, shape_rule::none),
      row("aten::size", op_class::meta, shape_rule::none),
      row("prim::TupleConstruct", op_class::meta, shape_rule::none),
      row("aten::dim", op_class::meta, shape_rule::none),
      row("prim::dtype", op_class::meta, shape_rule::none),
      row("prim::device", op_class::meta, shape_rule::none),
  };
  return table;
}

const op_info* find_op(std::string_view kind) {
  static const std::unordered_map<std::string_view, const op_info*> index = [] {
    std::unordered_map<std::string_view, const op_info*> m;
    for (const op_info& o : op_table()) m.emplace(o.name, &o);
    return m;
  }();
  auto it = index.find(kind);
  return it == index.end() ? nullptr : it->second;
}

bool op_is(std::string_view kind, op_class c) {
  const op_info* o = find_op(kind);
  return o && o->cls == c;
}

std::vector<std::string> ops_of(op_class c) {
  std::vector<std::string> out;
  for (const op_info& o : op_table())
    if (o.cls == c) out.emplace_back(o.name);
  return out;
}

namespace {

// Each channels-last twin: its kind, the convolution it stands for, that convolution's
// input rank.
struct conv_twin {
  std::string_view twin, convolution;
  size_t rank;
};
constexpr conv_twin kConvTwins[] = {{kConv2dNhwc, "aten::conv2d", 4},
                                    {kConvTranspose2dNhwc, "aten::conv_transpose2d", 4},
                                    {kConv3dNdhwc, "aten::conv3d", 5},
                                    {kConvTranspose3dNdhwc, "aten::conv_transpose3d", 5}};

}  // namespace

std::string_view convolution_of_twin(std::string_view kind) {
  for (const conv_twin& t : kConvTwins)
    if (kind == t.twin) return t.convolution;
  return {};
}

const char* twin_of_convolution(std::string_view kind, size_t rank) {
  for (const conv_twin& t : kConvTwins)
    if (kind == t.convolution && (rank == 0 || rank == t.rank)) return t.twin.data();
  return nullptr;
}

std::string channels_last_layer(std::string_view kind) {
  // ATen's CUDA kernels of these keep a channels-last input's layout in their result.
  static const std::set<std::string_view> layers = {
      "aten::max_pool2d",          "aten::max_pool3d",          "aten::avg_pool2d", "aten::avg_pool3d",
      "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d", "aten::batch_norm"};
  return layers.count(kind) ? std::string(kChannelsLastLayer) + std::string(kind) : std::string();
}

bool runs_channels_last(std::string_view kind) {
  return (!convolution_of_twin(kind).empty() && kind != kConv2dNhwc) || kind.rfind(kChannelsLastLayer, 0) == 0;
}

}  // namespace ks::rules
