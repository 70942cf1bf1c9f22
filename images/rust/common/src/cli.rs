//! The command line both binaries share: `server [--cc=NAME]`, `fetch` (the contract is in the environment),
//! `version`. Bad input: Err with one line naming it (the caller exits 2).

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Serve; `cc` is the congestion control named on the command line ("" for the library's default).
    Server { cc: String },
    Fetch,
    Version,
}

/// Parse the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    const USAGE: &str = "allowed are server [--cc=NAME], fetch, version";
    match args.split_first() {
        None => Err(format!("no command: {USAGE}")),
        Some((cmd, rest)) => match (cmd.as_str(), rest) {
            ("server", rest) => {
                let mut cc = String::new();
                for a in rest {
                    match a.strip_prefix("--cc=") {
                        Some(v) => cc = v.to_string(),
                        None => return Err(format!("unknown server option {a:?}: allowed is --cc=NAME")),
                    }
                }
                Ok(Command::Server { cc })
            }
            ("fetch", []) => Ok(Command::Fetch),
            ("version", []) => Ok(Command::Version),
            ("fetch" | "version", [extra, ..]) => Err(format!("unexpected argument {extra:?} after {cmd}")),
            (other, _) => Err(format!("unknown command {other:?}: {USAGE}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn commands() {
        assert_eq!(parse(&args(&["server"])), Ok(Command::Server { cc: String::new() }));
        assert_eq!(parse(&args(&["server", "--cc=bbr"])), Ok(Command::Server { cc: "bbr".into() }));
        assert_eq!(parse(&args(&["fetch"])), Ok(Command::Fetch));
        assert_eq!(parse(&args(&["version"])), Ok(Command::Version));
        assert!(parse(&args(&[])).unwrap_err().starts_with("no command"));
        assert!(parse(&args(&["serve"])).unwrap_err().starts_with("unknown command \"serve\""));
        assert!(parse(&args(&["server", "--port=1"])).is_err());
        assert!(parse(&args(&["fetch", "x"])).is_err());
    }

    proptest! {
        #[test]
        fn errors_are_one_line(a in proptest::collection::vec("[ -~]{0,12}", 0..4)) {
            if let Err(e) = parse(&a) {
                prop_assert!(!e.contains('\n'));
            }
        }
    }
}
