//! `nsfleet bench`: nsfleet and its peers measured in the same run.

pub struct CreateArgs {
    pub count: u64,
    pub shell_count: u64,
    pub runs: usize,
    pub workers: usize,
    pub json: bool,
}

pub fn create(_a: CreateArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
