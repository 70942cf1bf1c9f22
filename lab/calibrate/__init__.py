"""Calibrating the lab to a measured path (issue 35): a user's measurements of a path (pcap, ping/irtt + iperf3,
flent) read into one measurement folder (`quiclab probe`), the first estimates of a link from it and the scenario
file that carries them (`quiclab calibrate`), and the search over candidate links whose measuring the lab supplies
(search.py). docs/calibrate.md says what exists and what does not yet."""
