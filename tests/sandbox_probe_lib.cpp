// A shared library that lives outside the system's directories (build/tests/probe-lib),
// for sandbox_test: a program linked to it starts only where the loader may read there.
extern "C" int ks_sandbox_probe_value() { return 42; }
