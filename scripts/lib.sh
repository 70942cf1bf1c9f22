# Shared helpers for quiclab's shell scripts.
if [ -t 1 ]; then c_ok=$'\e[32m'; c_warn=$'\e[33m'; c_err=$'\e[31m'; c_dim=$'\e[2m'; c_off=$'\e[0m'
else c_ok=; c_warn=; c_err=; c_dim=; c_off=; fi
step() { printf '%s· %s%s\n' "$c_dim" "$*" "$c_off"; }
ok() { printf '%s✓%s %s\n' "$c_ok" "$c_off" "$*"; }
warn() { printf '%s!%s %s\n' "$c_warn" "$c_off" "$*" >&2; }
die() { printf '%serror:%s %s\n' "$c_err" "$c_off" "$*" >&2; exit 2; }
