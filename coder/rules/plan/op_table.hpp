#pragma once
// The ops the rules coder knows, in one table: for each ATen name its class (which
// template takes it), its shape rule (how shapes.cpp gives its result's shape), and
// for an elementwise op the CUDA expression chain.cpp writes for it.
//
// An expression is text with placeholders:
//   {x}     the first operand (input 0: a variable, parameter or literal);
//   {k}     input k read as an operand (a tensor loaded, a size parameter, a literal);
//           operands are read in ascending k, after {x};
//   {k=D}   input k as a constant float literal, D when the node has no such input.
// An elementwise row with no expression is written by chain.cpp's own code: its
// arguments change the expression's form (add's alpha, div's rounding mode, pow's
// exponent, clamp's optional bounds, gelu's approximation, dropout's mode).
//
// What it promises:
// - an op is in one row, so in one class; an op in no row is a fallback (a library
//   step through its schema) or an error;
// - adding an elementwise op of one operand (or constant arguments) is one row.

#include <string>
#include <string_view>
#include <vector>

namespace ks::rules {

enum class op_class {
  elementwise,  // fused into chains (elementwise.cpp; prologues and epilogues)
  reduction,    // row_reduce.cpp: reductions and the normalisations built on them
  scan,         // scan.cpp: cumsum, cumprod
  pool,         // pool.cpp: max and avg pools, 1-d to 3-d
  product,      // library.cpp: float products run by ATen
  convolution,  // library.cpp for conv2d; the others are fallbacks (conv_bias.cpp reads them)
  meta,         // lists and sizes: no kernel, read from the graph's values
};

enum class shape_rule {
  none,       // no template gives its shape: a fallback
  broadcast,  // the broadcast of its tensor operands
  reduce,     // its input without the reduced dims (kept as 1 with keepdim)
  same,       // its input's shape
  window,     // a pool's windows over the last dims
  library,    // the product's or convolution's result (shapes.cpp, per op)
};

struct op_info {
  std::string_view name;  // the ATen name, without an in-place underscore
  op_class cls;
  shape_rule shape;
  std::string_view expr = {};  // elementwise: the CUDA expression (see the top)
  int inputs = 0;              // elementwise: exactly this many inputs (0: any)
  bool fast_math = false;      // elementwise: expr calls KS_EXP or KS_DIV (device_helpers.hpp)
};

// Every row, in the table's order.
const std::vector<op_info>& op_table();
// The row of op `kind` (already without its in-place underscore), or nullptr.
const op_info* find_op(std::string_view kind);
bool op_is(std::string_view kind, op_class c);
// The names of class `c`, in the table's order.
std::vector<std::string> ops_of(op_class c);

// A convolution's channels-last twin (passes/conv_layout.hpp rewrites to it): the ATen
// op's arguments, its result [N, H, W, C] ([N, D, H, W, C] in 3-d). conv2d's twin is the
// library template's (library.cpp writes it as aten::conv2d with memory_format
// channels_last and result_layout nhwc); no template takes the others, and fallback.cpp
// runs them through their ATen schema with attrs.run_layout channels_last
// (gpu/dispatch_runtime.hpp). Level 2's transposed convolutions lost most of their time
// to cuDNN's conversions (91_ConvTranspose2d_Softmax_...: 1.0 of its 2.7 ms).
inline constexpr const char* kConv2dNhwc = "ks::conv2d_nhwc";
inline constexpr const char* kConvTranspose2dNhwc = "ks::conv_transpose2d_nhwc";
inline constexpr const char* kConv3dNdhwc = "ks::conv3d_ndhwc";
inline constexpr const char* kConvTranspose3dNdhwc = "ks::conv_transpose3d_ndhwc";
// The ATen convolution whose twin `kind` is (aten::conv2d for ks::conv2d_nhwc); empty
// where `kind` is no twin.
std::string_view convolution_of_twin(std::string_view kind);
// The twin of convolution `kind` on an input of `rank` dims (any rank where 0): null for
// the others (a 2-d kind on 5-d, conv1d).
const char* twin_of_convolution(std::string_view kind, size_t rank = 0);
// A network's layer that reads a channels-last value (conv_layout.hpp): a pool or a
// batch norm run through its ATen schema on the value's memory, handed to it as an NCHW
// view with channels-last strides, its result [N, H, W, C] too. Its kind is the ATen
// op's behind this prefix ("ks::nhwc::aten::max_pool2d").
inline constexpr std::string_view kChannelsLastLayer = "ks::nhwc::";
// The layer twin of ATen op `kind`; empty where conv_layout takes no such layer.
std::string channels_last_layer(std::string_view kind);
// Whether a node of this kind runs through its ATen schema with attrs.run_layout
// channels_last: the convolution twins of all but conv2d, and the layer twins.
bool runs_channels_last(std::string_view kind);

}  // namespace ks::rules
