#pragma once
// Catch2 for tests that also include LibTorch. c10's logging (glog here) defines CHECK
// to abort on failure; included after Catch, it replaces Catch's CHECK, and a failing
// check aborts the test program instead of being reported with its values. Include
// this instead of <catch2/catch.hpp>, before any ATen header: Catch, then c10's
// logging, then Catch's CHECK again (Catch v2's own definition). LibTorch's own
// checks are TORCH_CHECK, which this leaves alone.
#include <c10/util/Logging.h>
#include <catch2/catch.hpp>
#undef CHECK
#define CHECK(...) INTERNAL_CATCH_TEST("CHECK", Catch::ResultDisposition::ContinueOnFailure, __VA_ARGS__)
