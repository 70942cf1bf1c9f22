"""Per-run evidence: packet captures, TLS key logs, qlog, and what they tell (pcap-based goodput)."""
