//! Prometheus text exposition (format 0.0.4) of a [`Snapshot`].

use crate::packet::ProtoClass;
use crate::stats::{DirCounters, DirGauges, Direction, DropCause, Snapshot};
use crate::turn::READ_WAIT_BUCKETS_S;
use std::fmt::Write;

/// Content type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn float(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "NaN".to_string()
    }
}

/// Render all metrics.
pub fn render(s: &Snapshot, version: &str) -> String {
    let mut o = String::with_capacity(8192);
    type PerProto = (&'static str, &'static str, fn(&DirCounters) -> &[u64; 4]);
    let per_proto: [PerProto; 4] = [
        (
            "quiclab_link_packets_total",
            "Packets that left the emulator (delivered).",
            |c| &c.delivered_packets,
        ),
        (
            "quiclab_link_bytes_total",
            "Bytes of IP packets that left the emulator (delivered).",
            |c| &c.delivered_bytes,
        ),
        (
            "quiclab_link_received_packets_total",
            "Packets that entered the emulator.",
            |c| &c.received_packets,
        ),
        (
            "quiclab_link_received_bytes_total",
            "Bytes of IP packets that entered the emulator.",
            |c| &c.received_bytes,
        ),
    ];
    for (name, help, get) in per_proto {
        header(&mut o, name, "counter", help);
        for (d, dir) in Direction::ALL.iter().enumerate() {
            let vals = get(&s.counters[d]);
            for p in ProtoClass::ALL {
                let _ = writeln!(
                    o,
                    "{name}{{direction=\"{}\",protocol=\"{}\"}} {}",
                    dir.label(),
                    p.label(),
                    vals[p as usize]
                );
            }
        }
    }
    let name = "quiclab_link_drops_total";
    header(
        &mut o,
        name,
        "counter",
        "Packets dropped by the emulator, by cause.",
    );
    for (d, dir) in Direction::ALL.iter().enumerate() {
        for c in DropCause::ALL {
            let _ = writeln!(
                o,
                "{name}{{direction=\"{}\",cause=\"{}\"}} {}",
                dir.label(),
                c.label(),
                s.counters[d].drops[c as usize]
            );
        }
    }
    type PerDir = (&'static str, &'static str, fn(&DirCounters) -> u64);
    let per_dir: [PerDir; 3] = [
        (
            "quiclab_link_duplicated_packets_total",
            "Copies the emulator made (duplication); each also counts as delivered or dropped.",
            |c| c.duplicated,
        ),
        (
            "quiclab_link_corrupted_packets_total",
            "Packets with one bit flipped (delivered; the receiver's checksum drops them).",
            |c| c.corrupted,
        ),
        (
            "quiclab_link_ecn_marked_packets_total",
            "ECN-capable packets marked CE instead of dropped (AQM, or loss with loss_ecn).",
            |c| c.ecn_marked,
        ),
    ];
    for (name, help, get) in per_dir {
        header(&mut o, name, "counter", help);
        for (d, dir) in Direction::ALL.iter().enumerate() {
            let _ = writeln!(
                o,
                "{name}{{direction=\"{}\"}} {}",
                dir.label(),
                get(&s.counters[d])
            );
        }
    }
    type Gauge = (&'static str, &'static str, fn(&DirGauges) -> f64);
    let gauges: [Gauge; 7] = [
        (
            "quiclab_link_queue_packets",
            "Packets in the bottleneck queue (including the one being serialized).",
            |g| g.queue_packets as f64,
        ),
        (
            "quiclab_link_queue_bytes",
            "Bytes in the bottleneck queue (including the packet being serialized).",
            |g| g.queue_bytes as f64,
        ),
        (
            "quiclab_link_delay_line_packets",
            "Packets serialized and waiting out their delay.",
            |g| g.delay_line_packets as f64,
        ),
        (
            "quiclab_link_rate_bytes_per_second",
            "Configured rate in force in bytes/s (x8 = bit/s; trace: mean rate); 0 = unlimited.",
            |g| g.rate_bps as f64 / 8.0,
        ),
        (
            "quiclab_link_delay_seconds",
            "Configured one-way base delay.",
            |g| g.delay_seconds,
        ),
        (
            "quiclab_link_jitter_seconds",
            "Configured jitter scale.",
            |g| g.jitter_seconds,
        ),
        (
            "quiclab_link_loss_ratio",
            "Configured long-run mean loss ratio of the loss model.",
            |g| g.loss_ratio,
        ),
    ];
    for (name, help, get) in gauges {
        header(&mut o, name, "gauge", help);
        for (d, dir) in Direction::ALL.iter().enumerate() {
            let _ = writeln!(
                o,
                "{name}{{direction=\"{}\"}} {}",
                dir.label(),
                float(get(&s.gauges[d]))
            );
        }
    }
    let singles = [
        (
            "quiclab_link_config_applied_total",
            "Configurations applied (including the initial one).",
            s.config_applied_total,
        ),
        (
            "quiclab_link_malformed_packets_total",
            "Packets that could not be parsed as IPv4/IPv6 and were dropped.",
            s.malformed_packets_total,
        ),
        (
            "quiclab_link_write_errors_total",
            "Packets dropped because writing them to the TUN device failed.",
            s.write_errors_total,
        ),
    ];
    for (name, help, v) in singles {
        header(&mut o, name, "counter", help);
        let _ = writeln!(o, "{name} {v}");
    }
    let name = "quiclab_link_read_wait_seconds";
    header(
        &mut o,
        name,
        "histogram",
        "Per packet read: how long it may have waited unread in the TUN device because of the loop's own work.",
    );
    let mut cum = 0;
    for (i, le) in READ_WAIT_BUCKETS_S.iter().enumerate() {
        cum += s.read_wait.counts[i];
        let _ = writeln!(o, "{name}_bucket{{le=\"{le}\"}} {cum}");
    }
    let _ = writeln!(o, "{name}_bucket{{le=\"+Inf\"}} {}", s.read_wait.count());
    let _ = writeln!(o, "{name}_sum {}", float(s.read_wait.sum_seconds));
    let _ = writeln!(o, "{name}_count {}", s.read_wait.count());
    header(&mut o, "quiclab_link_info", "gauge", "Build information.");
    let _ = writeln!(o, "quiclab_link_info{{version=\"{version}\"}} 1");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_shape() {
        let mut s = Snapshot::default();
        s.counters[0].delivered_packets[0] = 5;
        s.counters[1].drops[2] = 3;
        s.gauges[0].rate_bps = 20_000_000;
        s.gauges[0].delay_seconds = 0.025;
        let text = render(&s, "0.1.0");
        assert!(text
            .contains("quiclab_link_packets_total{direction=\"downlink\",protocol=\"tcp\"} 5\n"));
        assert!(
            text.contains("quiclab_link_drops_total{direction=\"uplink\",cause=\"outage\"} 3\n")
        );
        assert!(
            text.contains("quiclab_link_rate_bytes_per_second{direction=\"downlink\"} 2500000\n")
        );
        assert!(text.contains("quiclab_link_delay_seconds{direction=\"downlink\"} 0.025\n"));
        assert!(text.contains("# TYPE quiclab_link_bytes_total counter\n"));
        assert!(text.contains("quiclab_link_info{version=\"0.1.0\"} 1\n"));
        assert!(text
            .contains("quiclab_link_drops_total{direction=\"downlink\",cause=\"tun_queue\"} 0\n"));
        assert!(text.contains("quiclab_link_read_wait_seconds_bucket{le=\"+Inf\"} 0\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(!name.contains(' '), "{line}");
            assert!(name.starts_with("quiclab_link_"), "{line}");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
