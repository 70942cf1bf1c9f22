//! The download client's endpoint contract (docs/implementations.md; the lab's adapter lab.endpoints.envfetch):
//! PROTOCOL (only h3 here: anything else exits 127, "unsupported"), URL (a space-separated list: N objects in turn
//! on one connection), TIMEOUT (seconds; 60 when unset), HOST_ADDR (where the packets go, as curl's --resolve; the
//! certificate is verified for the URL's host name), CC (the congestion control), and QLOGDIR / SSLKEYLOGFILE
//! (`evidence`). Parsed from a lookup function so it is tested without touching the process environment.

use std::net::IpAddr;

/// Exit code for a protocol the client does not speak (the lab records the combination as unsupported).
pub const UNSUPPORTED: i32 = 127;
/// Exit code for bad input (one line on stderr naming it).
pub const USAGE: i32 = 2;
const DEFAULT_TIMEOUT_S: f64 = 60.0;

/// One object to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    pub host: String,
    pub port: u16,
    /// host[:port] as in the URL (the request's :authority)
    pub authority: String,
    /// path and query (the request's :path)
    pub path: String,
}

/// A fetch as the environment asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchArgs {
    pub targets: Vec<Target>,
    pub timeout_s: f64,
    pub host_addr: Option<IpAddr>,
    /// CC as given ("" when unset: the stack's default)
    pub cc: String,
}

/// Why a fetch did not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractError {
    /// PROTOCOL is not h3.
    NotH3(String),
    /// Bad or missing input: the one line to print.
    Usage(String),
}

impl ContractError {
    pub fn exit_code(&self) -> i32 {
        match self {
            ContractError::NotH3(_) => UNSUPPORTED,
            ContractError::Usage(_) => USAGE,
        }
    }

    pub fn message(&self, stack: &str) -> String {
        match self {
            ContractError::NotH3(p) => format!("{stack}'s client speaks HTTP/3 only, not {p}"),
            ContractError::Usage(m) => format!("{stack} fetch: {m}"),
        }
    }
}

/// One https URL into its parts; Err names it.
pub fn target(url: &str) -> Result<Target, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("bad URL {url:?}: not a URL"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("bad URL {url:?}: allowed is https://HOST[:PORT]/PATH"));
    }
    let authority = uri.authority().ok_or_else(|| format!("bad URL {url:?}: no host"))?;
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
    if host.is_empty() {
        return Err(format!("bad URL {url:?}: no host"));
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    Ok(Target {
        url: url.to_string(),
        host,
        port: authority.port_u16().unwrap_or(443),
        authority: authority.as_str().to_string(),
        path: if path.is_empty() { "/".into() } else { path.to_string() },
    })
}

/// The contract from an environment lookup.
pub fn parse(env: impl Fn(&str) -> Option<String>) -> Result<FetchArgs, ContractError> {
    let protocol = env("PROTOCOL").unwrap_or_default();
    if !protocol.is_empty() && protocol != "h3" {
        return Err(ContractError::NotH3(protocol));
    }
    let urls = env("URL").unwrap_or_default();
    let targets = urls.split_whitespace().map(target).collect::<Result<Vec<_>, _>>().map_err(ContractError::Usage)?;
    let Some(first) = targets.first() else {
        return Err(ContractError::Usage("URL is not set".into()));
    };
    if let Some(other) = targets.iter().find(|t| t.host != first.host || t.port != first.port) {
        return Err(ContractError::Usage(format!(
            "URL {:?} is on another server than {:?}: the objects are fetched on one connection", other.url, first.url)));
    }
    let timeout_s = match env("TIMEOUT").filter(|t| !t.trim().is_empty()) {
        None => DEFAULT_TIMEOUT_S,
        Some(t) => match t.trim().parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => v,
            _ => return Err(ContractError::Usage(format!("bad TIMEOUT {t:?}: allowed is a number of seconds > 0"))),
        },
    };
    let host_addr = match env("HOST_ADDR").filter(|a| !a.trim().is_empty()) {
        None => None,
        Some(a) => Some(a.trim().parse::<IpAddr>().map_err(|_| {
            ContractError::Usage(format!("bad HOST_ADDR {a:?}: allowed is an IP address"))
        })?),
    };
    Ok(FetchArgs { targets, timeout_s, host_addr, cc: env("CC").unwrap_or_default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_adapters_environment() {
        let args = parse(env(&[("PROTOCOL", "h3"), ("URL", "https://quinn.quiclab/obj/1000 https://quinn.quiclab/obj/2000"),
                               ("TIMEOUT", "30"), ("HOST_ADDR", "10.71.2.17"), ("CC", "bbr")])).unwrap();
        assert_eq!(args.targets.len(), 2);
        assert_eq!(args.targets[0].host, "quinn.quiclab");
        assert_eq!(args.targets[0].port, 443);
        assert_eq!(args.targets[1].path, "/obj/2000");
        assert_eq!(args.timeout_s, 30.0);
        assert_eq!(args.host_addr, Some("10.71.2.17".parse().unwrap()));
        assert_eq!(args.cc, "bbr");
        let plain = parse(env(&[("URL", "https://x.quiclab:4433/obj/1")])).unwrap();
        assert_eq!((plain.timeout_s, plain.host_addr, plain.targets[0].port, plain.targets[0].authority.as_str()),
                   (60.0, None, 4433, "x.quiclab:4433"));
    }

    #[test]
    fn what_is_refused() {
        assert_eq!(parse(env(&[("PROTOCOL", "h2"), ("URL", "https://a/obj/1")])).unwrap_err().exit_code(), 127);
        for bad in [vec![], vec![("URL", "  ")], vec![("URL", "http://a/obj/1")], vec![("URL", "https://a/1 https://b/1")],
                    vec![("URL", "https://a/1"), ("TIMEOUT", "-1")], vec![("URL", "https://a/1"), ("TIMEOUT", "x")],
                    vec![("URL", "https://a/1"), ("HOST_ADDR", "host")]] {
            let e = parse(env(&bad)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
            assert!(!e.message("quinn").contains('\n'));
        }
    }

    proptest! {
        /// Any list of https URLs on one server parses into as many targets, in order, with their paths.
        #[test]
        fn url_lists(host in "[a-z]{1,8}\\.quiclab", port in proptest::option::of(1u16..),
                     paths in proptest::collection::vec("/obj/[a-z0-9-]{1,10}", 1..6), timeout in 1u32..1000) {
            let base = match port { Some(p) => format!("https://{host}:{p}"), None => format!("https://{host}") };
            let urls: Vec<String> = paths.iter().map(|p| format!("{base}{p}")).collect();
            let t = timeout.to_string();
            let args = parse(env(&[("URL", &urls.join(" ")), ("TIMEOUT", &t)])).unwrap();
            prop_assert_eq!(args.targets.iter().map(|t| t.path.clone()).collect::<Vec<_>>(), paths);
            prop_assert!(args.targets.iter().all(|t| t.port == port.unwrap_or(443) && t.host == host));
            prop_assert_eq!(args.timeout_s, f64::from(timeout));
        }
    }
}
