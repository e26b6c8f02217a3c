// An exported module's dispatcher steps, compiled as the module compiles them:
// gpu/dispatch_runtime.hpp, then export/launcher_dispatch.inc (the texts the exporter
// embeds), here against CPU LibTorch. export_test compiles launchers against ATen
// stand-ins, which cannot hold the dispatcher; this is where the module's side of it
// is compiled and run without a GPU. Part of reviewer_test (it needs LibTorch).
#include "tests/catch_torch.hpp"

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/util/Exception.h>

#include "gpu/dispatch_runtime.hpp"
#include "export/launcher_dispatch.inc"

namespace {

// The message a step fails with, as the module's user sees it.
std::string failure(const std::map<std::string, std::string>& attrs, const std::vector<ks_arg>& args) {
  try {
    ks_call_by_schema(attrs, args);
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
  const std::string sort = "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)";
  auto r = ks_call_by_schema({{"schema", sort}, {"dim", "0"}, {"descending", "True"}}, {ks_targ(x)});
  REQUIRE(r.size() == 2);
  auto [values, indices] = at::sort(x, 0, true);
  CHECK(r[0].equal(values));
  CHECK(r[1].equal(indices));
  // A tensor list, and a positional number for a Scalar.
  CHECK(ks_call_by_schema({{"schema", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"}, {"tensors", "2 tensors"}},
                          {ks_targ(x), ks_targ(x * 2)})[0]
            .equal(at::cat({x, x * 2})));
  CHECK(ks_call_by_schema({{"schema", "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"}},
                          {ks_targ(x), ks_farg(2.5)})[0]
            .equal(x + 2.5));
  // The module reads attributes with strtoll/strtod, as it always has: "+1" reads.
  CHECK(ks_call_by_schema({{"schema", sort}, {"dim", "+1"}}, {ks_targ(x)})[0].equal(std::get<0>(at::sort(x, 1))));
  // Its failures, worded for the module's user.
  CHECK(failure({{"schema", sort}, {"dim", "one"}}, {ks_targ(x)}) == "ModelNew: attrs.dim: expected an integer, got one");
  CHECK(failure({{"schema", sort}}, {}) == "ModelNew: aten::sort needs a positional argument for self");
  CHECK(failure({{"schema", sort}}, {ks_targ(x), ks_targ(x)}) == "ModelNew: 2 arguments given, aten::sort takes 1");
  CHECK(failure({{"schema", "aten::flip(Tensor self, int[] dims) -> Tensor"}}, {ks_targ(x)}) ==
        "ModelNew: aten::flip needs the argument dims");
  CHECK(failure({{"schema", "aten::size.int(Tensor self, int dim) -> int"}, {"dim", "1"}}, {ks_targ(x)}) ==
        "ModelNew: result 0 of aten::size is not a tensor");
  CHECK(failure({{"schema", "aten::no_such_op(Tensor self) -> Tensor"}}, {ks_targ(x)}) ==
        "ModelNew: this PyTorch has no operator for the schema aten::no_such_op(Tensor self) -> Tensor");
}
