#!/bin/sh
# quiclab-rcvbuf-errors: this network namespace's UdpRcvbufErrors (datagrams dropped because a UDP socket's
# receive buffer was full), from /proc/net/snmp. The fetch wrappers read it before and after a transfer.
exec awk '/^Udp:/ { if (!h) { for (i = 2; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 }
                    else { print $c + 0; exit } }' /proc/net/snmp
