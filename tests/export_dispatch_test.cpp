// An exported module's dispatcher steps, compiled as the module compiles them:
// gpu/dispatch_runtime.hpp, then export/launcher_dispatch.inc (the texts the exporter
// embeds), here against CPU LibTorch. export_test compiles launchers against ATen
// stand-ins, which cannot hold the dispatcher; this is where the module's side of it
// is compiled and run without a GPU. Part of reviewer_test (it needs LibTorch).
#include "tests/support/catch_torch.hpp"

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/util/Exception.h>

#include "gpu/dispatch_runtime.hpp"
#include "gpu/result_adoption.hpp"

// After dispatch_runtime.hpp: the module's text uses what it declares.
#include "export/launcher_dispatch.inc"

namespace {

const c10::Device kCpu{c10::kCPU};

// The message a step fails with, as the module's user sees it.
std::string failure(const std::map<std::string, std::string>& attrs, const std::vector<ks_arg>& args) {
  try {
    ks_call_by_schema(attrs, args, kCpu);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no failure)";
}

}  // namespace

TEST_CASE("exported dispatcher steps: the module's side of gpu/dispatch_runtime.hpp", "[export][dispatcher]") {
  const at::Tensor x = at::arange(24, at::kFloat).reshape({4, 6}).flip({1}) * 0.5 - 3;
  const std::string sort =
      "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)";
  auto r = ks_call_by_schema({{"schema", sort}, {"dim", "0"}, {"descending", "True"}}, {ks_targ(x)}, kCpu);
  REQUIRE(r.size() == 2);
  auto [values, indices] = at::sort(x, 0, true);
  CHECK(r[0].equal(values));
  CHECK(r[1].equal(indices));
  // A tensor list, and a positional number for a Scalar.
  CHECK(ks_call_by_schema({{"schema", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"}, {"tensors", "2 tensors"}},
                          {ks_targ(x), ks_targ(x * 2)}, kCpu)[0]
            .equal(at::cat({x, x * 2})));
  CHECK(ks_call_by_schema({{"schema", "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"}},
                          {ks_targ(x), ks_farg(2.5)}, kCpu)[0]
            .equal(x + 2.5));
  // The module reads attributes with strtoll/strtod, as it always has: "+1" reads.
  CHECK(ks_call_by_schema({{"schema", sort}, {"dim", "+1"}}, {ks_targ(x)}, kCpu)[0].equal(std::get<0>(at::sort(x, 1))));
  // Its failures, worded for the module's user.
  CHECK(failure({{"schema", sort}, {"dim", "one"}}, {ks_targ(x)}) ==
        "ModelNew: attrs.dim: expected an integer, got one");
  CHECK(failure({{"schema", sort}}, {}) == "ModelNew: aten::sort needs a positional argument for self");
  CHECK(failure({{"schema", sort}}, {ks_targ(x), ks_targ(x)}) == "ModelNew: 2 arguments given, aten::sort takes 1");
  CHECK(failure({{"schema", "aten::flip(Tensor self, int[] dims) -> Tensor"}}, {ks_targ(x)}) ==
        "ModelNew: aten::flip needs the argument dims");
  CHECK(failure({{"schema", "aten::size.int(Tensor self, int dim) -> int"}, {"dim", "1"}}, {ks_targ(x)}) ==
        "ModelNew: result 0 of aten::size is not a tensor");
  CHECK(failure({{"schema", "aten::no_such_op(Tensor self) -> Tensor"}}, {ks_targ(x)}) ==
        "ModelNew: this PyTorch has no operator for the schema aten::no_such_op(Tensor self) -> Tensor");
}

// attrs.run_layout channels_last (a transposed convolution the rules coder moved to
// channels-last): 4-d operands passed channels-last, the 4-d result handed on as [N, H,
// W, C], contiguous; the same values as the op in NCHW.
TEST_CASE("exported dispatcher steps: run_layout hands a channels-last result on as NHWC", "[export][dispatcher]") {
  const std::string schema =
      "aten::conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] "
      "padding=0, int[2] output_padding=0, int groups=1, int[2] dilation=1) -> Tensor";
  const at::Tensor x = at::randn({2, 3, 5, 7});
  const at::Tensor w = at::randn({3, 6, 3, 3});
  std::map<std::string, std::string> attrs{
      {"schema", schema},           {"bias", "None"}, {"stride", "[2, 2]"},   {"padding", "[1, 1]"},
      {"output_padding", "[1, 1]"}, {"groups", "1"},  {"dilation", "[1, 1]"}, {"run_layout", "channels_last"}};
  const at::Tensor want = at::conv_transpose2d(x, w, {}, {2, 2}, {1, 1}, {1, 1});
  const std::vector<at::Tensor> got = ks_call_by_schema(attrs, {ks_targ(x), ks_targ(w)}, kCpu);
  REQUIRE(got.size() == 1);
  CHECK(got[0].sizes() == at::IntArrayRef({2, 10, 14, 6}));
  CHECK(got[0].is_contiguous());
  CHECK(at::allclose(got[0], want.permute({0, 2, 3, 1}), 1e-5, 1e-5));
  attrs["run_layout"] = "nhwc";
  CHECK(failure(attrs, {ks_targ(x), ks_targ(w)}) == "ModelNew: attrs.run_layout: expected channels_last, got nhwc");
  // 5-d: channels_last_3d, the result [N, D, H, W, C].
  const std::map<std::string, std::string> conv3d{
      {"schema",
       "aten::conv3d(Tensor input, Tensor weight, Tensor? bias=None, int[3] stride=1, int[3] padding=0, int[3] "
       "dilation=1, int groups=1) -> Tensor"},
      {"bias", "None"},
      {"padding", "[1, 1, 1]"},
      {"run_layout", "channels_last"}};
  const at::Tensor x3 = at::randn({2, 3, 4, 5, 6});
  const at::Tensor w3 = at::randn({7, 3, 3, 3, 3});
  const at::Tensor got3 = ks_call_by_schema(conv3d, {ks_targ(x3), ks_targ(w3)}, kCpu).at(0);
  CHECK(got3.sizes() == at::IntArrayRef({2, 4, 5, 6, 7}));
  CHECK(got3.is_contiguous());
  CHECK(at::allclose(got3, at::conv3d(x3, w3, {}, 1, 1).permute({0, 2, 3, 4, 1}), 1e-4, 1e-5));
  // A network's next layer on a value already [N, H, W, C] (conv_layout.hpp): the
  // permute step is a view of its memory with channels-last strides, which the layer
  // takes as it is; its result handed on as [N, H, W, C] again.
  const at::Tensor nhwc = at::randn({2, 6, 7, 3});
  const at::Tensor view = ks_call_by_schema({{"schema", "aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)"},
                                             {"dims", "[0, 3, 1, 2]"}},
                                            {ks_targ(nhwc)}, kCpu)
                              .at(0);
  CHECK(view.sizes() == at::IntArrayRef({2, 3, 6, 7}));
  CHECK(view.data_ptr() == nhwc.data_ptr());
  CHECK(view.is_contiguous(at::MemoryFormat::ChannelsLast));
  const at::Tensor pooled =
      ks_call_by_schema(
          {{"schema",
            "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] "
            "dilation=1, bool ceil_mode=False) -> Tensor"},
           {"kernel_size", "[2, 2]"},
           {"stride", "[2, 2]"},
           {"run_layout", "channels_last"}},
          {ks_targ(view)}, kCpu)
          .at(0);
  CHECK(pooled.sizes() == at::IntArrayRef({2, 3, 3, 3}));
  CHECK(pooled.is_contiguous());
  CHECK(
      at::equal(pooled, at::max_pool2d(nhwc.permute({0, 3, 1, 2}).contiguous(), {2, 2}, {2, 2}).permute({0, 2, 3, 1})));
}

// The generated launcher prepares each dispatcher step once (a function-local static)
// and calls it with each call's tensors: the same results, the same failures.
TEST_CASE("exported dispatcher steps: prepared once, called with each call's tensors", "[export][dispatcher]") {
  const std::string sort =
      "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)";
  const std::map<std::string, std::string> attrs{{"schema", sort}, {"dim", "0"}, {"descending", "True"}};
  const at::Tensor x0 = at::randn({5, 3});
  const ks_prepared_step step = ks_prepare_by_schema(attrs, {ks_targ(x0)});
  for (int call = 0; call < 3; ++call) {
    const at::Tensor x = call == 0 ? x0 : at::randn({5 + call, 3});
    const std::vector<ks_arg> args{ks_targ(x)};
    auto got = ks_call_prepared(step, args, kCpu);
    auto want = ks_call_by_schema(attrs, args, kCpu);
    REQUIRE(got.size() == 2);
    CHECK(got[0].equal(want[0]));
    CHECK(got[1].equal(want[1]));
    CHECK(got[0].equal(std::get<0>(at::sort(x, 0, true))));
  }
  const std::map<std::string, std::string> cat{{"schema", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"},
                                               {"tensors", "2 tensors"}};
  const ks_prepared_step joined = ks_prepare_by_schema(cat, {ks_targ(x0), ks_targ(x0)});
  const at::Tensor y = at::randn({2, 3});
  CHECK(ks_call_prepared(joined, {ks_targ(y), ks_targ(x0)}, kCpu)[0].equal(at::cat({y, x0})));
  // Preparing fails as the unprepared call does.
  auto prepare_failure = [](const std::map<std::string, std::string>& a, const std::vector<ks_arg>& args) {
    try {
      ks_prepare_by_schema(a, args);
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no failure)");
  };
  CHECK(prepare_failure({{"schema", sort}, {"dim", "one"}}, {ks_targ(x0)}) ==
        "ModelNew: attrs.dim: expected an integer, got one");
  CHECK(prepare_failure({{"schema", sort}}, {ks_targ(x0), ks_targ(x0)}) ==
        failure({{"schema", sort}}, {ks_targ(x0), ks_targ(x0)}));
  CHECK(prepare_failure({{"schema", "aten::no_such_op(Tensor self) -> Tensor"}}, {ks_targ(x0)}) ==
        failure({{"schema", "aten::no_such_op(Tensor self) -> Tensor"}}, {ks_targ(x0)}));
  // Arguments of other kinds than prepared for are refused, not misread.
  CHECK_THROWS_AS(ks_call_prepared(step, {ks_iarg(1)}, kCpu), std::invalid_argument);
}

TEST_CASE("an exported step without tensor arguments makes its result where the inputs are", "[export][dispatcher]") {
  // A traced `torch.randn(..., device=x.device)`: a factory whose Device is the plan's.
  // The meta device stands in for the GPU (on the CPU the two readings agree).
  const std::map<std::string, std::string> randn{
      {"schema",
       "aten::randn(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None) -> Tensor"},
      {"size", "[2, 3]"},
      {"device", "inputs"},
      {"dtype", "None"},
      {"layout", "None"},
      {"pin_memory", "False"}};
  const c10::Device meta{c10::kMeta};
  const at::Tensor made = ks_call_by_schema(randn, {}, meta).at(0);
  CHECK(made.device() == meta);
  CHECK(made.sizes() == at::IntArrayRef({2, 3}));
  const ks_prepared_step step = ks_prepare_by_schema(randn, {});
  CHECK(ks_call_prepared(step, {}, meta).at(0).device() == meta);
  // A step with a tensor argument keeps that tensor's device.
  const std::map<std::string, std::string> like{
      {"schema",
       "aten::zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"},
      {"device", "inputs"}};
  CHECK(ks_call_by_schema(like, {ks_targ(at::ones({2}))}, meta).at(0).device() == kCpu);
}

// gpu/result_adoption.hpp, as the reviewer's plan runner and the module's launcher
// decide it: a fresh result is taken as the buffer; one that shares memory with
// anything the plan can still see, or is not laid out as the buffer, is copied.
TEST_CASE("library results: taken as the declared buffer only when nothing else sees their memory",
          "[export][adoption]") {
  using ks::result_adoption::adoptable;
  using ks::result_adoption::shares_memory;
  const at::Tensor x = at::arange(24, at::kFloat).reshape({4, 6});
  const at::Tensor w = at::ones({6, 3}, at::kFloat);
  const at::Tensor dst = at::empty({4, 3}, at::kFloat);
  const std::vector<const at::Tensor*> live{&x, &w};
  // A new tensor of the buffer's sizes, dtype and layout: taken.
  CHECK(adoptable({at::matmul(x, w)}, 0, dst, live));
  // A view of an input (reshape, or contiguous() with nothing to do): copied.
  const at::Tensor xv = x.reshape({4, 6});
  CHECK(shares_memory(xv, x));
  CHECK_FALSE(adoptable({xv}, 0, at::empty({4, 6}, at::kFloat), live));
  CHECK_FALSE(adoptable({x.contiguous()}, 0, at::empty({4, 6}, at::kFloat), live));
  // A view of part of an input shares its storage even where the bytes differ.
  CHECK_FALSE(adoptable({x.narrow(0, 2, 2).contiguous()}, 0, at::empty({2, 6}, at::kFloat), live));
  // Two results in one storage (chunk): neither is taken.
  const at::Tensor y = at::matmul(x, w).t().contiguous();  // 3 x 4, a fresh storage
  auto halves = at::chunk(y, 3, 0);
  std::vector<at::Tensor> parts(halves.begin(), halves.end());
  CHECK_FALSE(adoptable(parts, 0, at::empty({1, 4}, at::kFloat), live));
  // Laid out otherwise than the buffer, or of other sizes or dtype: copied.
  const at::Tensor fresh_t = at::matmul(x, w).t();
  CHECK_FALSE(fresh_t.is_contiguous());
  CHECK_FALSE(adoptable({fresh_t}, 0, at::empty({3, 4}, at::kFloat), live));
  CHECK_FALSE(adoptable({at::matmul(x, w)}, 0, at::empty({3, 4}, at::kFloat), live));
  CHECK_FALSE(adoptable({at::matmul(x, w).to(at::kDouble)}, 0, dst, live));
  // A fresh tensor shares nothing with the inputs; an empty one has no bytes to share.
  CHECK_FALSE(shares_memory(at::matmul(x, w), x));
  CHECK(adoptable({at::empty({0, 3}, at::kFloat)}, 0, at::empty({0, 3}, at::kFloat), live));
}
