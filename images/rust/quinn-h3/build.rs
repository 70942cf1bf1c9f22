//! The quinn and h3 versions this binary is built with, from the workspace's Cargo.lock (`quiclab-quinn version`).
use quiclab_h3_common::lockfile::locked_version;

fn main() {
    let lock = std::fs::read_to_string("../Cargo.lock").expect("the workspace's Cargo.lock");
    for (name, var) in [("quinn", "QUINN_VERSION"), ("quinn-proto", "QUINN_PROTO_VERSION"), ("h3", "H3_VERSION"),
                        ("h3-quinn", "H3_QUINN_VERSION"), ("rustls", "RUSTLS_VERSION")] {
        let v = locked_version(&lock, name).unwrap_or_else(|| panic!("{name} is not in Cargo.lock"));
        println!("cargo:rustc-env={var}={v}");
    }
    println!("cargo:rerun-if-changed=../Cargo.lock");
}
