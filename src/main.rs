fn main() {
    std::process::exit(lrbc_inspector::cli::main());
}
