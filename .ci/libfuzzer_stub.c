/* What libFuzzer gives the fuzz targets, for the tests' build (.ci/test), which builds
 * them for clippy's lints and never runs them: a `main` that says so, and the one
 * libFuzzer function the libfuzzer-sys crate names (its mutator hook). They link this
 * instead of libFuzzer's C++ sources; `cargo fuzz` builds them with the real libFuzzer. */
#include <stddef.h>
#include <stdio.h>

size_t LLVMFuzzerMutate(unsigned char *data, size_t size, size_t max_size) {
  (void)data;
  (void)max_size;
  return size;
}

int main(void) {
  fputs("a fuzz target of the tests' build, not a fuzzer: run it with `cargo fuzz run`\n",
        stderr);
  return 2;
}
