//! A package's version from Cargo.lock's text, for the binaries' `version` (each build.rs reads the workspace's
//! Cargo.lock and passes the library's locked version to the compiler: the binary reports what it was built with).

/// The version of `name` in a Cargo.lock (the first `[[package]]` of that name), or None.
pub fn locked_version(lock: &str, name: &str) -> Option<String> {
    let want = format!("name = \"{name}\"");
    let mut lines = lock.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line == want {
            let next = lines.next()?;
            return next.strip_prefix("version = \"")?.strip_suffix('"').map(str::to_string);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_locked_version() {
        let lock = "version = 4\n\n[[package]]\nname = \"quinn-proto\"\nversion = \"0.11.19\"\n\n[[package]]\n\
                    name = \"quinn\"\nversion = \"0.11.12\"\nsource = \"registry\"\n";
        assert_eq!(locked_version(lock, "quinn").as_deref(), Some("0.11.12"));
        assert_eq!(locked_version(lock, "quinn-proto").as_deref(), Some("0.11.19"));
        assert_eq!(locked_version(lock, "quiche"), None);
    }

    proptest! {
        #[test]
        fn any_package_list_reads_back(pkgs in proptest::collection::btree_map("[a-z][a-z0-9-]{0,10}",
                                                                              "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}", 1..8)) {
            let lock: String = pkgs.iter()
                .map(|(n, v)| format!("[[package]]\nname = \"{n}\"\nversion = \"{v}\"\n\n")).collect();
            for (n, v) in &pkgs {
                let got = locked_version(&lock, n);
                prop_assert_eq!(got.as_deref(), Some(v.as_str()));
            }
        }
    }
}
