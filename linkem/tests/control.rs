//! The control HTTP API against a fake main loop (loopback only).

#![cfg(target_os = "linux")]

use linkem::cli;
use linkem::config::Config;
use linkem::control::{self, Shared};
use linkem::http::request;
use linkem::sys::Waker;
use std::net::TcpListener;
use std::sync::Arc;

fn start() -> (String, Arc<Shared>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shared = Arc::new(Shared::default());
    let waker = Arc::new(Waker::new().unwrap());
    let (tx, rx) = control::channel();
    control::spawn(listener, shared.clone(), tx, waker).unwrap();
    // Fake loop: apply every request and acknowledge it.
    let s2 = shared.clone();
    std::thread::spawn(move || {
        while let Ok(req) = rx.recv() {
            *s2.config.lock().unwrap() = req.config.clone();
            s2.snapshot.lock().unwrap().config_applied_total += 1;
            let _ = req.applied.send(req.config);
        }
    });
    (addr, shared)
}

#[test]
fn api_round_trip() {
    let (addr, shared) = start();
    let (s, b) = request(&addr, "GET", "/healthz", None).unwrap();
    assert_eq!((s, b.as_slice()), (200, b"ok\n".as_slice()));

    let (s, b) = request(&addr, "GET", "/config", None).unwrap();
    assert_eq!(s, 200);
    assert_eq!(
        Config::from_json(std::str::from_utf8(&b).unwrap()).unwrap(),
        Config::default()
    );

    let bad = br#"{"downlink": {"loss": {"model": "bernoulli", "p": 1.5}}}"#;
    let (s, b) = request(&addr, "PUT", "/config", Some(bad)).unwrap();
    assert_eq!(s, 400);
    let msg = String::from_utf8(b).unwrap();
    assert!(msg.starts_with("downlink.loss.p: "), "{msg}");
    assert_eq!(msg.trim_end().lines().count(), 1);

    let good = br#"{"seed": 5, "uplink": {"delay_us": 20000, "rate_bps": 10000000}}"#;
    let (s, b) = request(&addr, "PUT", "/config", Some(good)).unwrap();
    assert_eq!(s, 200);
    let applied = Config::from_json(std::str::from_utf8(&b).unwrap()).unwrap();
    assert_eq!(applied.seed, 5);
    assert_eq!(applied.uplink.delay_us, 20_000);
    assert_eq!(*shared.config.lock().unwrap(), applied);

    let (s, b) = request(&addr, "GET", "/metrics", None).unwrap();
    assert_eq!(s, 200);
    let text = String::from_utf8(b).unwrap();
    assert!(
        text.contains("quiclab_link_config_applied_total 1\n"),
        "{text}"
    );

    assert_eq!(request(&addr, "GET", "/nope", None).unwrap().0, 404);
    assert_eq!(request(&addr, "DELETE", "/config", None).unwrap().0, 405);

    // The CLI client against the same server.
    let shown = cli::show(&addr).unwrap();
    assert!(shown.contains("\"seed\":5"), "{shown}");
    let dir = std::env::temp_dir().join(format!("linkem-ctl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("c.json");
    std::fs::write(&f, r#"{"downlink": {"delay_us": 1000}}"#).unwrap();
    let out = cli::set(&addr, f.to_str().unwrap()).unwrap();
    assert!(out.contains("\"delay_us\":1000"), "{out}");
    std::fs::write(&f, r#"{"downlink": {"delay_us": 1000, "x": 1}}"#).unwrap();
    let e = cli::set(&addr, f.to_str().unwrap()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string().starts_with("downlink.x: unknown field"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(cli::show("127.0.0.1:1").unwrap_err().exit_code(), 1);
}
