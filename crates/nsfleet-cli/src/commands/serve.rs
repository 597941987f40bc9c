//! `nsfleet serve`: the lab server, the workbench page and its HTTP API.

use clap::Args;
use nsfleet_serve::server;
use std::path::PathBuf;

/// Serve a workbench page and an HTTP API for every fleet
///
/// Serve every fleet under the run directory to a browser and to scripts: a workbench
/// page (the live graph; a terminal in any node, on a real terminal; pull or plug a
/// cable, impair a link, capture its packets; stop and start nodes; the events; edit the
/// topology, see the dry run, apply it) and the HTTP API it is built on, under /api/v1
/// (described at /api/v1/openapi.json, and in docs/serve.md). Run by root, it serves
/// root's fleets; run by a user, that user's own (their run folder), and what it starts
/// is theirs.
///
/// It prints a URL with a new random token, as Jupyter does; the token is also in
/// RUN_DIR/serve-PORT/token (0600). Every request needs it: the page keeps it in a
/// cookie set from that URL, scripts send `Authorization: Bearer TOKEN`. Requests whose
/// Host is not this server's (DNS rebinding) or that come from a page of another origin
/// are refused, WebSockets too. Whoever has the token can run shells in the nodes as
/// their root: keep it as you would the password of the user who runs the server.
///
/// On loopback it speaks HTTP. Any other address needs HTTPS: a certificate and its key
/// (PEM), so that neither the token nor a shell's bytes cross the network in clear. It
/// answers to the address it listens on (every address of the machine for 0.0.0.0),
/// the machine's name, and each --host; a Host or Origin naming anything else is refused.
///
///   nsfleet serve                       # http://127.0.0.1:PORT/?token=... (a free port)
///   nsfleet serve --port 8080
///   TOKEN=$(cat /run/nsfleet/serve-8080/token)
///   curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8080/api/v1/fleets
///   curl -sN -H "Authorization: Bearer $TOKEN" \
///     "http://127.0.0.1:8080/api/v1/fleets/lab/capture?ifaces=r1:eth0" | wireshark -k -i -
///   nsfleet serve --listen 0.0.0.0 --port 8443 --cert cert.pem --key key.pem --host lab.example.net
///                                       # https://lab.example.net:8443/?token=...
///
/// Ctrl-C, SIGTERM or SIGHUP end it: its terminals' shells, its captures and its folder
/// go with it (a SIGKILL leaves the folder, which the next server on that port, or
/// `nsfleet clean`, removes). Fleets it brought up stay: `nsfleet down` takes them down.
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct ServeCommand {
    /// The port; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The address to listen on (0.0.0.0 or :: for every address). One other than
    /// loopback (127.0.0.1, ::1) needs --cert and --key.
    #[arg(long, default_value = "127.0.0.1")]
    listen: std::net::IpAddr,
    /// The server's certificate chain, leaf first (PEM): it speaks HTTPS.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// The certificate's private key (PEM, unencrypted).
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Another name the server is reached by (a name its certificate holds); repeat for
    /// more. The first names it in the URL printed.
    #[arg(long = "host", value_name = "NAME")]
    hosts: Vec<String>,
    /// Print {"url", "port", "token_file"} as one JSON object, not the URL alone.
    #[arg(long)]
    json: bool,
}

impl ServeCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let ServeCommand {
            port,
            listen,
            cert,
            key,
            hosts,
            json,
        } = self;
        server::serve(server::ServeArgs {
            listen,
            port,
            run_dir,
            program: std::env::current_exe()?,
            json,
            tls: cert.zip(key),
            hosts,
        })
    }
}
