//! The commands, one module each: a command's arguments, its help (the doc comment that
//! clap prints) and the call that hands them to the library.

pub mod apply;
pub mod args;
pub mod bench;
pub mod capture;
pub mod clean;
pub mod completions;
pub mod deploy;
pub mod destroy;
pub mod down;
pub mod events;
pub mod exec;
pub mod gen;
pub mod graph;
pub mod image;
pub mod impair;
pub mod inspect;
pub mod kube;
pub mod link;
pub mod manpage;
pub mod mn;
pub mod netlab;
pub mod node;
pub mod report;
pub mod save;
pub mod scenario;
pub mod serve;
pub mod stats;
pub mod status;
pub mod tools;
pub mod up;
pub mod vm;
pub mod wait;

use clap::Subcommand;

// In the order of `nsfleet help`. No doc comments here: clap would take a variant's for the
// command's help, and the help is written beside each command's arguments.
#[derive(Subcommand)]
pub enum Command {
    Up(up::UpCommand),
    Deploy(deploy::DeployCommand),
    Destroy(destroy::DestroyCommand),
    Inspect(inspect::InspectCommand),
    Save(save::SaveCommand),
    Down(down::DownCommand),
    Status(status::StatusCommand),
    Exec(exec::ExecCommand),
    Impair(impair::ImpairCommand),
    Link(link::LinkCommand),
    Apply(apply::ApplyCommand),
    Capture(capture::CaptureCommand),
    Stats(stats::StatsCommand),
    Graph(graph::GraphCommand),
    Serve(serve::ServeCommand),
    Events(events::EventsCommand),
    Wait(wait::WaitCommand),
    Node(node::NodeCommand),
    #[command(subcommand)]
    Scenario(scenario::ScenarioCommand),
    Gen(Box<gen::GenCommand>),
    Vm(vm::VmCommand),
    Mn(mn::MnCommand),
    Netlab(netlab::NetlabCommand),
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    Clean(clean::CleanCommand),
    #[command(subcommand)]
    Kube(kube::KubeCommand),
    #[command(subcommand)]
    Image(image::ImageCommand),
    #[command(subcommand)]
    Bench(bench::Bench),
    Report(report::ReportCommand),
    Completions(completions::CompletionsCommand),
    Manpage(manpage::ManpageCommand),
    #[command(hide = true)]
    StandIn(netlab::StandInCommand),
}
