#include "coder/rules/op_specs.hpp"

namespace ks::rules {

const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> ops = {
      "aten::relu", "aten::sigmoid", "aten::tanh", "aten::exp", "aten::log", "aten::neg", "aten::abs",
      "aten::sqrt", "aten::rsqrt", "aten::silu", "aten::sin", "aten::cos", "aten::erf", "aten::erfc",
      "aten::log1p", "aten::expm1", "aten::reciprocal", "aten::square", "aten::floor", "aten::ceil",
      "aten::trunc", "aten::sign", "aten::hardsigmoid", "aten::hardswish", "aten::mish", "aten::selu",
      "aten::log_sigmoid", "aten::relu6", "aten::exp2", "aten::log2", "aten::log10", "aten::atan",
      "aten::sinh", "aten::cosh", "aten::tan", "aten::gelu", "aten::leaky_relu", "aten::hardtanh",
      "aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::clip", "aten::elu", "aten::celu",
      "aten::softplus", "aten::threshold", "aten::pow", "aten::dropout", "aten::feature_dropout",
      "aten::alpha_dropout", "aten::contiguous", "aten::clone", "aten::detach", "aten::to",
      "aten::type_as", "aten::expand_as", "aten::expand", "aten::hardshrink", "aten::softshrink",
      "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::rsub", "aten::maximum",
      "aten::minimum", "aten::atan2", "aten::true_divide", "aten::multiply", "aten::subtract",
      "aten::divide", "aten::sigmoid", "aten::softsign", "aten::logit"};
  return ops;
}

const std::set<std::string>& reduction_ops() {
  static const std::set<std::string> ops = {
      "aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max", "aten::min",
      "aten::logsumexp", "aten::softmax", "aten::log_softmax", "aten::layer_norm", "aten::var",
      "aten::std", "aten::norm", "aten::linalg_vector_norm"};
  return ops;
}

const std::set<std::string>& library_ops() {
  static const std::set<std::string> ops = {"aten::matmul", "aten::mm", "aten::bmm", "aten::addmm",
                                            "aten::linear", "aten::conv2d"};
  return ops;
}

bool is_meta(const std::string& kind) {
  return kind == "prim::ListConstruct" || kind == "aten::size" || kind == "prim::TupleConstruct" ||
         kind == "aten::dim" || kind == "prim::dtype" || kind == "prim::device";
}

int64_t normalize_dim(int64_t d, size_t rank) { return d < 0 ? d + static_cast<int64_t>(rank) : d; }

}  // namespace ks::rules
