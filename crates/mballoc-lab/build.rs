//! Builds the libext2fs shim of the churn benchmark only where the library's header is
//! installed (`libext2fs-dev` on Debian); elsewhere the peer is skipped with a message.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_ext2fs)");
    println!("cargo:rerun-if-changed=csrc/ext2fs_shim.c");
    println!("cargo:rerun-if-env-changed=MBALLOC_NO_EXT2FS");
    let header = [
        "/usr/include/ext2fs/ext2fs.h",
        "/usr/local/include/ext2fs/ext2fs.h",
    ]
    .into_iter()
    .find(|h| Path::new(h).exists());
    let Some(header) = header else {
        return; // `mballoc bench` says the peer is skipped, and why.
    };
    if std::env::var_os("MBALLOC_NO_EXT2FS").is_some() {
        return;
    }
    println!("cargo:rerun-if-changed={header}");
    let ok = cc::Build::new()
        .file("csrc/ext2fs_shim.c")
        .opt_level(2)
        .warnings(false)
        .try_compile("mballoc_ext2fs_shim");
    if let Err(e) = ok {
        println!("cargo:warning=libext2fs shim did not compile ({e}): the peer is skipped");
        return;
    }
    println!("cargo:rustc-link-lib=ext2fs");
    println!("cargo:rustc-link-lib=com_err");
    println!("cargo:rustc-cfg=have_ext2fs");
}
