//! The store's records: `images/<hex>.json` (an image as loaded: its config's platform,
//! layers, size and process fields) and `names.json` (name -> image id). Names live only
//! in names.json, so that taking a name from one image and giving it to another is one
//! write. Each record is written into the writer's tmp folder and renamed into place.

use crate::work::Work;
use crate::{ImageId, ImageRecord, RunConfig};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// `images/<hex>.json`: an `ImageRecord` without its names, and the run fields.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct StoredImage {
    pub id: ImageId,
    pub architecture: String,
    pub os: String,
    pub layers: Vec<String>,
    pub size: u64,
    pub created_unix: Option<u64>,
    pub run: RunConfig,
}

impl StoredImage {
    pub fn record(&self, names: Vec<String>) -> ImageRecord {
        ImageRecord {
            id: self.id.clone(),
            names,
            architecture: self.architecture.clone(),
            os: self.os.clone(),
            layers: self.layers.clone(),
            size: self.size,
            created_unix: self.created_unix,
        }
    }
}

pub(crate) type Names = BTreeMap<String, ImageId>;

pub(crate) fn read_names(root: &Path) -> anyhow::Result<Names> {
    let path = root.join("names.json");
    match fs::read(&path) {
        Ok(text) => {
            serde_json::from_slice(&text).with_context(|| format!("{} is damaged", path.display()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Names::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

pub(crate) fn write_names(root: &Path, work: &Work, names: &Names) -> anyhow::Result<()> {
    replace(
        work,
        &root.join("names.json"),
        &serde_json::to_vec_pretty(names)?,
    )
}

/// The image of id hex `hex`, if the store has it.
pub(crate) fn read_image(root: &Path, hex: &str) -> anyhow::Result<Option<StoredImage>> {
    let path = root.join("images").join(format!("{hex}.json"));
    match fs::read(&path) {
        Ok(text) => {
            Ok(Some(serde_json::from_slice(&text).with_context(|| {
                format!("{} is damaged", path.display())
            })?))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

pub(crate) fn write_image(root: &Path, work: &Work, image: &StoredImage) -> anyhow::Result<()> {
    let path = root.join("images").join(format!("{}.json", image.id.hex()));
    replace(work, &path, &serde_json::to_vec_pretty(image)?)
}

/// Every image of the store.
pub(crate) fn all_images(root: &Path) -> anyhow::Result<Vec<StoredImage>> {
    let mut images = Vec::new();
    for entry in fs::read_dir(root.join("images"))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(hex) = name.strip_suffix(".json") else {
            continue;
        };
        images.extend(read_image(root, hex)?);
    }
    Ok(images)
}

/// Writes `bytes` to `dest` whole or not at all: into the work folder, to disk, renamed.
fn replace(work: &Work, dest: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = work.path().join(dest.file_name().unwrap_or_default());
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dest).with_context(|| format!("cannot write {}", dest.display()))
}

/// Seconds since the epoch of an RFC 3339 time as image configs write it
/// (`2024-05-22T18:18:12.052034407Z`, or with an offset such as `+02:00`).
pub(crate) fn unix_time(text: &str) -> Option<u64> {
    let num = |s: &str| s.parse::<i64>().ok();
    let (date, rest) = text.split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-');
    let (y, m, day) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    let clock_end = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
    let (clock, zone) = rest.split_at(clock_end);
    let clock = clock.split('.').next()?;
    let mut c = clock.splitn(3, ':');
    let (h, min, s) = (num(c.next()?)?, num(c.next()?)?, num(c.next()?)?);
    let offset = match zone.as_bytes().first() {
        Some(b'+') | Some(b'-') => {
            let (oh, om) = zone[1..].split_once(':')?;
            let secs = num(oh)? * 3600 + num(om)? * 60;
            if zone.starts_with('-') {
                -secs
            } else {
                secs
            }
        }
        _ => 0,
    };
    let secs = days_from_civil(y, m, day) * 86400 + h * 3600 + min * 60 + s - offset;
    u64::try_from(secs).ok()
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_times_in_unix_seconds() {
        assert_eq!(unix_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            unix_time("2024-05-22T18:18:12.052034407Z"),
            Some(1716401892)
        );
        assert_eq!(unix_time("2024-05-22T20:18:12+02:00"), Some(1716401892));
        assert_eq!(unix_time("2000-02-29T00:00:00Z"), Some(951782400));
        assert_eq!(unix_time("1969-12-31T23:59:59Z"), None, "before the epoch");
        assert_eq!(unix_time("yesterday"), None);
    }
}
