use clap::Parser;

/// mballoc: the ext4 multi-block allocator lab.
#[derive(Parser)]
#[command(name = "mballoc", version, about)]
enum Cli {}

fn main() {
    let _ = Cli::parse();
}
