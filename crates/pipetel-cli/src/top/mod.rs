//! `pipetel top`: the running stages and their slowest, straggling, stalled and lost shards,
//! redrawn every `--interval` from the local rows store, the fleet's store (`--url`) or pull
//! endpoints (`--endpoint`). The local store is followed ([`crate::follow::Follower`]): each
//! frame reads only the bytes appended since the last and folds the new rows into the
//! [`model::Model`], so a frame costs the new rows plus one pass over the running shards.

mod frame;
mod model;
mod prom;

use std::io::{self, Write};
use std::time::Instant;

use crate::args::top::TopArgs;
use crate::follow::Follower;
use crate::lost::LostRule;
use crate::remote::FleetFollower;

/// ANSI: cursor home, clear the screen. No other terminal state is touched, so an interrupt
/// (Ctrl-C's default ending) leaves the terminal as it was.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Where the frames come from.
enum Source<'a> {
    Store { follower: Follower, model: model::Model, shown: String },
    Fleet { fleet: FleetFollower<'a>, model: model::Model, shown: String },
    Endpoints(prom::Endpoints),
}

impl Source<'_> {
    fn frame(&mut self, rule: &LostRule, notes: &mut dyn Write) -> io::Result<frame::Frame> {
        match self {
            Source::Store { follower, model, shown } => {
                for r in follower.poll(notes)? {
                    model.add(&r);
                }
                Ok(model.frame(rule, format!("{shown} ({} rows)", model.rows())))
            }
            Source::Fleet { fleet, model, shown } => {
                for r in fleet.poll()? {
                    model.add(&r);
                }
                Ok(model.frame(rule, format!("{shown} ({} rows)", model.rows())))
            }
            Source::Endpoints(e) => Ok(e.frame(rule)),
        }
    }
}

/// Runs `pipetel top` until interrupted, or for one frame with `--once`.
pub(crate) fn run(a: &TopArgs) -> io::Result<()> {
    let mut notes = io::stderr();
    let rule = || LostRule::now(a.store.sample_interval);
    let mut source = if !a.endpoints.is_empty() {
        let mut e = prom::Endpoints::new(a.endpoints.clone());
        // The first scrape gives the counters the rates start from.
        let _ = e.frame(&rule());
        std::thread::sleep(a.interval);
        Source::Endpoints(e)
    } else if let Some(url) = &a.store.url {
        let mut fleet = FleetFollower::new(url, &a.store)?;
        let mut model = model::Model::default();
        for r in fleet.all()? {
            model.add(&r);
        }
        Source::Fleet { fleet, model, shown: pipetel_rows::fleet::redact(url) }
    } else {
        let path = crate::read::store_path(&a.store)?;
        let (follower, rotated) = Follower::open(&path, &mut notes)?;
        if !follower.exists() && rotated.is_empty() {
            if a.once {
                return Err(io::Error::new(io::ErrorKind::NotFound, format!("no rows store at {}", path.display())));
            }
            let _ = writeln!(notes, "pipetel top: {} does not exist yet; waiting for rows", path.display());
        }
        let mut model = model::Model::default();
        for r in &rotated {
            model.add(r);
        }
        Source::Store { follower, model, shown: path.display().to_string() }
    };
    let stdout = io::stdout();
    loop {
        let started = Instant::now();
        let text = source.frame(&rule(), &mut notes)?.render();
        let mut out = stdout.lock();
        if a.once {
            out.write_all(text.as_bytes())?;
            return out.flush();
        }
        // One write per frame: the terminal never shows half of one.
        out.write_all(format!("{CLEAR}{text}").as_bytes())?;
        out.flush()?;
        drop(out);
        std::thread::sleep(a.interval.saturating_sub(started.elapsed()));
    }
}
