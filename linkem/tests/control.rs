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

    // keep_state continues the streams of the seed in force: another seed is refused, one line.
    let other = br#"{"seed": 6, "keep_state": true}"#;
    let (s, b) = request(&addr, "PUT", "/config", Some(other)).unwrap();
    let msg = String::from_utf8(b).unwrap();
    assert_eq!(s, 400, "{msg}");
    assert!(
        msg.starts_with("keep_state: ") && msg.trim_end().lines().count() == 1,
        "{msg}"
    );
    let same = br#"{"seed": 5, "keep_state": true, "uplink": {"delay_us": 30000}}"#;
    let (s, _) = request(&addr, "PUT", "/config", Some(same)).unwrap();
    assert_eq!(s, 200);
    let (s, _) = request(&addr, "PUT", "/config", Some(good)).unwrap();
    assert_eq!(s, 200);

    let (s, b) = request(&addr, "GET", "/metrics", None).unwrap();
    assert_eq!(s, 200);
    let text = String::from_utf8(b).unwrap();
    assert!(
        text.contains("quiclab_link_config_applied_total 3\n"),
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

#[test]
fn put_reaches_every_loop_and_metrics_add_up() {
    use linkem::control::LoopHandle;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shared = Arc::new(Shared::for_loops(2));
    let applied = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..2 {
        let waker = Arc::new(Waker::new().unwrap());
        let (tx, rx) = control::channel();
        handles.push(LoopHandle { tx, waker });
        let (s2, a2) = (shared.clone(), applied.clone());
        std::thread::spawn(move || {
            {
                let mut snap = s2.slot(i).lock().unwrap();
                snap.counters[i].received_packets[0] = 10 + i as u64;
                snap.config_applied_total = 1;
            }
            while let Ok(req) = rx.recv() {
                // The second loop is slow: the PUT must still wait for it.
                std::thread::sleep(Duration::from_millis(50 * i as u64));
                s2.slot(i).lock().unwrap().config_applied_total += 1;
                a2.fetch_add(1, Ordering::SeqCst);
                let _ = req.applied.send(req.config);
            }
        });
    }
    control::spawn_loops(listener, shared.clone(), handles).unwrap();
    let good = br#"{"seed": 9, "downlink": {"delay_us": 5000}}"#;
    let (s, _) = request(&addr, "PUT", "/config", Some(good)).unwrap();
    assert_eq!(s, 200);
    assert_eq!(applied.load(Ordering::SeqCst), 2);
    let (s, b) = request(&addr, "GET", "/metrics", None).unwrap();
    assert_eq!(s, 200);
    let text = String::from_utf8(b).unwrap();
    for want in [
        "quiclab_link_received_packets_total{direction=\"downlink\",protocol=\"tcp\"} 10\n",
        "quiclab_link_received_packets_total{direction=\"uplink\",protocol=\"tcp\"} 11\n",
        "quiclab_link_config_applied_total 2\n",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
}
