//! `ferry crds`: the CRDs of every API Ferry defines or accepts.

pub fn run() -> anyhow::Result<()> {
    print!("{}", ferry_api::crds_yaml());
    Ok(())
}
