//! Command-line parsing and offline checking.
#![cfg(target_os = "linux")]

use linkem::cli::{check, parse, Command};
use linkem::driver::RunOptions;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The options of a command line that must parse as `run`.
fn run_options(line: &str) -> RunOptions {
    match parse(&args(line)).unwrap() {
        Command::Run(o) => *o,
        _ => panic!("not run: {line}"),
    }
}

#[test]
fn parse_run() {
    let o = run_options("run --tun tun0 --downlink 10.71.1.0/24 --uplink=10.71.2.0/24");
    assert_eq!(o.tun, "tun0");
    assert_eq!(o.listen, "0.0.0.0:9100");
    assert_eq!(o.uplink.to_string(), "10.71.2.0/24");
    assert_eq!(o.tun_up, None);
    assert_eq!(o.spin_ns, linkem::driver::DEFAULT_SPIN_NS);
}

#[test]
fn parse_spin() {
    let base = "run --tun t0 --downlink 10.71.1.0/24 --uplink 10.71.2.0/24";
    assert_eq!(run_options(&format!("{base} --spin-us 0")).spin_ns, 0);
    assert_eq!(run_options(&format!("{base} --spin-us 50")).spin_ns, 50_000);
    assert!(!run_options(base).napi);
    assert!(run_options(&format!("{base} --napi on")).napi);
}

#[test]
fn parse_run_two_tuns() {
    let o = run_options(
        "run --tun-down tdown --tun-up tup --downlink 10.71.1.0/24 --uplink 10.71.2.0/24",
    );
    assert_eq!(o.tun, "tdown");
    assert_eq!(o.tun_up.as_deref(), Some("tup"));
}

#[test]
fn parse_errors_are_bad_input() {
    for a in [
        "",
        "run --tun tun0 --downlink 10.71.1.0/24",
        "run --tun tun0 --downlink x --uplink 10.0.0.0/8",
        "run --bogus 1",
        "run --tun t0 --tun-up tup --downlink 10.71.1.0/24 --uplink 10.71.2.0/24",
        "run --tun-down tdown --downlink 10.71.1.0/24 --uplink 10.71.2.0/24",
        "run --tun-up tup --downlink 10.71.1.0/24 --uplink 10.71.2.0/24",
        "run --tun-down t --tun-up t --downlink 10.71.1.0/24 --uplink 10.71.2.0/24",
        "run --downlink 10.71.1.0/24 --uplink 10.71.2.0/24",
        "run --tun t0 --downlink 10.71.1.0/24 --uplink 10.71.2.0/24 --spin-us -1",
        "run --tun t0 --downlink 10.71.1.0/24 --uplink 10.71.2.0/24 --spin-us x",
        "run --tun t0 --downlink 10.71.1.0/24 --uplink 10.71.2.0/24 --spin-us 10001",
        "run --tun t0 --downlink 10.71.1.0/24 --uplink 10.71.2.0/24 --napi yes",
        "set",
        "check a b",
        "frobnicate",
        "show extra",
    ] {
        let e = parse(&args(a)).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{a}");
        assert!(!e.to_string().contains('\n'), "{a}");
    }
    assert!(matches!(
        parse(&args("set --addr 1.2.3.4:5 -")),
        Ok(Command::Set { .. })
    ));
}

#[test]
fn check_reports_field() {
    let dir = std::env::temp_dir().join(format!("linkem-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.json");
    std::fs::write(&p, r#"{"uplink": {"rate_bps": 0}}"#).unwrap();
    let e = check(p.to_str().unwrap()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().starts_with("uplink.rate_bps:"), "{e}");
    std::fs::write(&p, r#"{"seed": 3}"#).unwrap();
    assert!(check(p.to_str().unwrap()).unwrap().contains("\"seed\":3"));
    assert_eq!(check("/nonexistent/x.json").unwrap_err().exit_code(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}
