//! The quiche (and vendored BoringSSL's boring-sys) versions this binary is built with, from the workspace's
//! Cargo.lock (`quiclab-quiche version`).
use quiclab_h3_common::lockfile::locked_version;

fn main() {
    let lock = std::fs::read_to_string("../Cargo.lock").expect("the workspace's Cargo.lock");
    for (name, var) in [("quiche", "QUICHE_VERSION"), ("boring-sys", "BORING_SYS_VERSION")] {
        let v = locked_version(&lock, name).unwrap_or_else(|| panic!("{name} is not in Cargo.lock"));
        println!("cargo:rustc-env={var}={v}");
    }
    println!("cargo:rerun-if-changed=../Cargo.lock");
}
