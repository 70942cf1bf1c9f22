"""Per-run evidence: packet captures, TLS key logs, qlog, and what they tell (pcap-based goodput; resumption and
0-RTT proven from the decrypted capture: sessions.py)."""
