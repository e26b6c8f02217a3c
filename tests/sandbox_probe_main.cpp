// ks_sandbox_probe: prints the value of libks_sandbox_probe_lib.so, which it finds only
// through LD_LIBRARY_PATH (built without an RPATH), for sandbox_test.
#include <cstdio>

extern "C" int ks_sandbox_probe_value();

int main() {
  std::printf("probe %d\n", ks_sandbox_probe_value());
  return 0;
}
