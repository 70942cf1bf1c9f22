//! Direction selection, pass-through and malformed handling of `Link`.

mod common;

use common::packet;
use linkem::link::{Link, LinkVerdict};
use linkem::stats::{Direction, DropCause};
use linkem::{Config, Time};

fn to(dst: [u8; 4], seq: u64) -> Vec<u8> {
    let mut p = packet(seq, 100);
    p[16..20].copy_from_slice(&dst);
    p
}

#[test]
fn directions_and_passthrough() {
    let cfg = Config::from_json(
        r#"{"downlink": {"delay_us": 1000}, "uplink": {"delay_us": 2000, "loss": {"model": "bernoulli", "p": 1}}}"#,
    )
    .unwrap();
    let mut link = Link::new(
        "10.71.1.0/24".parse().unwrap(),
        "10.71.2.0/24".parse().unwrap(),
        cfg,
        Time::ZERO,
    );
    assert_eq!(
        link.push(to([10, 71, 1, 5], 1), Time::ZERO),
        LinkVerdict::Accepted(Direction::Downlink)
    );
    assert_eq!(
        link.push(to([10, 71, 2, 5], 2), Time::ZERO),
        LinkVerdict::Accepted(Direction::Uplink)
    );
    let (dir, cause, buf) = link.pop_drop().expect("the uplink's loss dropped it");
    assert_eq!(
        (dir, cause, common::seq_of(&buf)),
        (Direction::Uplink, DropCause::Loss, 2)
    );
    assert!(link.pop_drop().is_none());
    assert_eq!(
        link.push(to([192, 0, 2, 1], 3), Time::ZERO),
        LinkVerdict::Accepted(Direction::Other)
    );
    assert!(matches!(
        link.push(vec![0x45, 0, 0], Time::ZERO),
        LinkVerdict::Malformed(_)
    ));
    // Pass-through leaves at once; downlink after its 1 ms delay.
    assert_eq!(link.poll(Time::ZERO).map(|p| common::seq_of(&p)), Some(3));
    assert_eq!(link.poll(Time::ZERO), None);
    assert_eq!(link.next_deadline(), Some(Time::from_millis(1)));
    assert_eq!(
        link.poll(Time::from_millis(1)).map(|p| common::seq_of(&p)),
        Some(1)
    );
    assert_eq!(link.next_deadline(), None);

    let s = link.snapshot(Time::from_millis(1));
    assert_eq!(s.counters[0].total_delivered(), 1);
    assert_eq!(s.counters[1].drops[0], 1);
    assert_eq!(s.counters[2].total_received(), 1);
    assert_eq!(s.malformed_packets_total, 1);
    assert_eq!(s.gauges[1].loss_ratio, 1.0);
    assert_eq!(s.gauges[0].delay_seconds, 0.001);
    let text = linkem::metrics::render(&s, "t");
    assert!(text.contains("quiclab_link_packets_total{direction=\"other\",protocol=\"udp\"} 1\n"));
    assert!(text.contains("quiclab_link_drops_total{direction=\"uplink\",cause=\"loss\"} 1\n"));

    let mut c2 = link.config().clone();
    c2.downlink.rate_bps = Some(8_000_000);
    link.reconfigure(c2, Time::from_millis(2));
    let s = link.snapshot(Time::from_millis(2));
    assert_eq!(s.config_applied_total, 2);
    assert_eq!(s.gauges[0].rate_bps, 8_000_000);
}

#[test]
fn one_instant_for_both_directions_of_a_change() {
    // Outages in both directions, anchored where the change is applied: a
    // packet 1 ms after the change is dropped in both, 11 ms after in neither.
    let mut link = Link::new(
        "10.71.1.0/24".parse().unwrap(),
        "10.71.2.0/24".parse().unwrap(),
        Config::default(),
        Time::ZERO,
    );
    let out = r#"{"outages": {"period_ms": 1000, "down_ms": 10}}"#;
    let cfg = Config::from_json(&format!(r#"{{"downlink": {out}, "uplink": {out}}}"#)).unwrap();
    let at = Time::from_millis(500);
    link.reconfigure(cfg, at);
    for (dst, dir) in [
        ([10, 71, 1, 5], Direction::Downlink),
        ([10, 71, 2, 5], Direction::Uplink),
    ] {
        link.push(to(dst, 1), Time::from_millis(501));
        assert_eq!(
            link.pop_drop().map(|d| (d.0, d.1)),
            Some((dir, DropCause::Outage))
        );
        link.push(to(dst, 2), Time::from_millis(511));
        assert!(link.pop_drop().is_none());
    }
}
