//! The wire tools' command lines parse into the typed configurations they describe.

use clap::Parser;
use eagernfs_bench::cli_args::{BenchArgs, BenchCommand};
use eagernfs_bench::load::Schedule;
use std::time::Duration;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn parse(args: &[&str]) -> BenchCommand {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).unwrap_or_else(|e| panic!("{args:?}: {e}")).bench.command
}

#[test]
fn clap_definitions_are_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

#[test]
fn load_flags_become_a_load_config() {
    let BenchCommand::Load(a) = parse(&["load", "nfs://h/x", "--clients", "1,4,16", "--ramp", "100:2:800"])
    else {
        panic!()
    };
    let c = a.to_config().unwrap();
    assert_eq!(c.client_counts, vec![1, 4, 16]);
    assert_eq!(c.schedule, Schedule::Ramp { start: 100.0, factor: 2.0, max: 800.0, saturation: 0.9 });
    let BenchCommand::Load(a) = parse(&["load", "nfs://h/x", "--rates", "10,20", "--mix", "GETATTR=1"])
    else {
        panic!()
    };
    let c = a.to_config().unwrap();
    assert_eq!(c.schedule, Schedule::Rates(vec![10.0, 20.0]));
    assert_eq!(c.client_counts, vec![16]);
    assert_eq!(c.mix.to_text(), "GETATTR=1");
    let BenchCommand::Load(a) = parse(&["load", "nfs://h/x", "--closed-loop", "4"]) else { panic!() };
    assert_eq!(a.to_config().unwrap().schedule, Schedule::ClosedLoop { outstanding: 4 });
    let BenchCommand::Load(a) = parse(&["load", "nfs://h/x", "--clients", "0"]) else { panic!() };
    assert!(a.to_config().is_err(), "zero clients is refused");
}

#[test]
fn mountstorm_stream_and_compare_flags_parse() {
    let BenchCommand::Mountstorm(a) =
        parse(&["mountstorm", "127.0.0.1:2049", "--export", "/x", "--mount-port", "2050", "--clients", "7"])
    else {
        panic!()
    };
    let c = a.to_config().unwrap();
    assert_eq!((c.clients, c.options.mountport, c.options.hard), (7, Some(2050), false));
    assert_eq!(c.options.timeo, Duration::from_secs(10));
    let BenchCommand::Stream(a) =
        parse(&["stream", "nfs://h/x", "--direction", "write", "--size", "1MiB", "--in-flight", "4"])
    else {
        panic!()
    };
    let c = a.to_config().unwrap();
    assert_eq!((c.size_bytes, c.in_flight), (1 << 20, 4));
    let BenchCommand::Compare(a) = parse(&[
        "compare",
        "--target",
        "a=nfs://h/x",
        "--target",
        "b=nfs://h:2/y",
        "--restart",
        "b=true",
        "-o",
        "/tmp/o",
    ]) else {
        panic!()
    };
    let c = a.to_command().unwrap();
    assert_eq!(c.targets.len(), 2);
    assert_eq!(c.restarts.get("b").map(String::as_str), Some("true"));
    let BenchCommand::Compare(a) = parse(&["compare", "--target", "a=nfs://h/x", "-o", "/tmp/o"]) else {
        panic!()
    };
    assert!(a.to_command().is_err(), "one target is not a comparison");
}
