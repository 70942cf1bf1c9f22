//! Command-line parsing (by hand) and the `show`/`set`/`check` commands.

use crate::cidr::Cidr;
use crate::config::Config;
use crate::driver::RunOptions;
use std::io::Read;
use thiserror::Error;

pub const USAGE: &str = "\
usage:
  linkem run --tun NAME --downlink CIDR --uplink CIDR [--listen ADDR] [--config FILE] [--spin-us N] [--napi on|off]
  linkem run --tun-down NAME --tun-up NAME --downlink CIDR --uplink CIDR [--listen ADDR] [--config FILE] [--spin-us N]
             [--napi on|off]
  linkem show [--addr ADDR]
  linkem set [--addr ADDR] FILE|-
  linkem check FILE|-
--tun: one TUN device for both directions; --tun-down/--tun-up: one device (and thread) per direction,
routed by arrival interface (packets toward the client into --tun-down, toward the server into --tun-up)
--spin-us: poll instead of sleeping this long before each release time (precision costs CPU while
packets are due back to back; 0 = always sleep)
--napi on: the TUN queues get a threaded NAPI context, so the kernel forwards written packets in its own
thread, not in linkem's (needs a writable /sys/class/net/NAME/threaded, else a warning)
defaults: --listen 0.0.0.0:9100, --addr 127.0.0.1:9100, --spin-us 200, --napi off";

/// A failed command: `BadInput` exits 2, `Runtime` exits 1.
#[derive(Debug, Error)]
pub enum CliError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Runtime(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::BadInput(_) => 2,
            CliError::Runtime(_) => 1,
        }
    }
}

fn bad(msg: impl Into<String>) -> CliError {
    CliError::BadInput(msg.into())
}

/// A parsed command line.
#[derive(Debug)]
pub enum Command {
    Run(Box<RunOptions>),
    Show { addr: String },
    Set { addr: String, file: String },
    Check { file: String },
    Help,
    Version,
}

/// Split `--flag value` pairs and positionals; flags must be in `known`.
/// `--flag value` pairs and positional arguments.
type Split = (Vec<(String, String)>, Vec<String>);

fn split(args: &[String], known: &[&str]) -> Result<Split, CliError> {
    let (mut flags, mut pos) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a.starts_with("--") && a.len() > 2 {
            let (k, v) = match a.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => {
                    let v = it.next().ok_or_else(|| bad(format!("{a} needs a value")))?;
                    (a.clone(), v.clone())
                }
            };
            if !known.contains(&k.as_str()) {
                return Err(bad(format!("unknown option {k} (see linkem --help)")));
            }
            flags.push((k, v));
        } else {
            pos.push(a.clone());
        }
    }
    Ok((flags, pos))
}

fn flag(flags: &[(String, String)], name: &str) -> Option<String> {
    flags
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

fn no_positionals(pos: &[String]) -> Result<(), CliError> {
    match pos.first() {
        Some(p) => Err(bad(format!("unexpected argument {p:?}"))),
        None => Ok(()),
    }
}

/// Parse `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Command, CliError> {
    let Some(cmd) = args.first() else {
        return Err(bad(
            "missing command (run, show, set, check); see linkem --help",
        ));
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "-h" | "--help" | "help" => Ok(Command::Help),
        "-V" | "--version" => Ok(Command::Version),
        "run" => {
            let (f, pos) = split(
                rest,
                &[
                    "--tun",
                    "--tun-down",
                    "--tun-up",
                    "--downlink",
                    "--uplink",
                    "--listen",
                    "--config",
                    "--spin-us",
                    "--napi",
                ],
            )?;
            no_positionals(&pos)?;
            let need = |n: &str| flag(&f, n).ok_or_else(|| bad(format!("run: {n} is required")));
            let cidr = |n: &str| -> Result<Cidr, CliError> {
                need(n)?.parse().map_err(|e| bad(format!("{n}: {e}")))
            };
            let (tun, tun_up) = match (
                flag(&f, "--tun"),
                flag(&f, "--tun-down"),
                flag(&f, "--tun-up"),
            ) {
                (Some(t), None, None) => (t, None),
                (None, Some(d), Some(u)) if d != u => (d, Some(u)),
                (None, Some(_), Some(_)) => {
                    return Err(bad(
                        "run: --tun-down and --tun-up must be different devices",
                    ))
                }
                (None, None, None) => return Err(bad("run: --tun is required")),
                (None, _, _) => return Err(bad("run: --tun-down and --tun-up go together")),
                (Some(_), _, _) => return Err(bad("run: use either --tun or --tun-down/--tun-up")),
            };
            let spin_ns = match flag(&f, "--spin-us") {
                None => crate::driver::DEFAULT_SPIN_NS,
                Some(v) => match v.parse::<u64>() {
                    Ok(us) if us <= 10_000 => us * 1_000,
                    _ => {
                        return Err(bad(format!(
                            "--spin-us {v}: allowed is 0..10000 (microseconds)"
                        )))
                    }
                },
            };
            let napi = match flag(&f, "--napi").as_deref() {
                None | Some("off") => false,
                Some("on") => true,
                Some(v) => return Err(bad(format!("--napi {v}: allowed is on or off"))),
            };
            let config = match flag(&f, "--config") {
                Some(file) => load_config(&file)?,
                None => Config::default(),
            };
            Ok(Command::Run(Box::new(RunOptions {
                tun,
                tun_up,
                downlink: cidr("--downlink")?,
                uplink: cidr("--uplink")?,
                listen: flag(&f, "--listen").unwrap_or_else(|| "0.0.0.0:9100".into()),
                config,
                spin_ns,
                napi,
            })))
        }
        "show" => {
            let (f, pos) = split(rest, &["--addr"])?;
            no_positionals(&pos)?;
            Ok(Command::Show { addr: addr(&f) })
        }
        "set" | "check" => {
            let known: &[&str] = if cmd == "set" { &["--addr"] } else { &[] };
            let (f, pos) = split(rest, known)?;
            let file = match pos.as_slice() {
                [one] => one.clone(),
                _ => {
                    return Err(bad(format!(
                        "{cmd}: expected exactly one FILE (or - for stdin)"
                    )))
                }
            };
            Ok(if cmd == "set" {
                Command::Set {
                    addr: addr(&f),
                    file,
                }
            } else {
                Command::Check { file }
            })
        }
        other => Err(bad(format!("unknown command {other:?}; see linkem --help"))),
    }
}

fn addr(f: &[(String, String)]) -> String {
    flag(f, "--addr").unwrap_or_else(|| "127.0.0.1:9100".into())
}

fn read_input(file: &str) -> Result<String, CliError> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| bad(format!("reading stdin: {e}")))?;
        Ok(s)
    } else {
        std::fs::read_to_string(file).map_err(|e| bad(format!("{file}: {e}")))
    }
}

/// Read and validate a config file (`-` = stdin).
pub fn load_config(file: &str) -> Result<Config, CliError> {
    Config::from_json(&read_input(file)?).map_err(|e| bad(e.to_string()))
}

fn one_line(body: &[u8]) -> String {
    String::from_utf8_lossy(body).trim().replace('\n', " ")
}

/// `linkem show`: print the configuration in force.
pub fn show(addr: &str) -> Result<String, CliError> {
    let (status, body) = crate::http::request(addr, "GET", "/config", None)
        .map_err(|e| CliError::Runtime(format!("{addr}: {e}")))?;
    if status != 200 {
        return Err(CliError::Runtime(format!(
            "{addr}: HTTP {status}: {}",
            one_line(&body)
        )));
    }
    Ok(String::from_utf8_lossy(&body).trim_end().to_string())
}

/// `linkem set`: validate locally, PUT, print the configuration in force.
pub fn set(addr: &str, file: &str) -> Result<String, CliError> {
    let config = load_config(file)?;
    let json = config.to_json();
    let (status, body) = crate::http::request(addr, "PUT", "/config", Some(json.as_bytes()))
        .map_err(|e| CliError::Runtime(format!("{addr}: {e}")))?;
    match status {
        200 => Ok(String::from_utf8_lossy(&body).trim_end().to_string()),
        400 => Err(bad(one_line(&body))),
        s => Err(CliError::Runtime(format!(
            "{addr}: HTTP {s}: {}",
            one_line(&body)
        ))),
    }
}

/// `linkem check`: validate offline, print the normalized configuration.
pub fn check(file: &str) -> Result<String, CliError> {
    Ok(load_config(file)?.to_json())
}
