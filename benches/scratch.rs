use serde_json::value::RawValue;
use std::time::Instant;
fn main() {
    let bytes = std::fs::read("target/bench-data/cluster-5000-150000.json").unwrap();
    #[derive(serde::Deserialize)]
    struct L<'a> {
        #[serde(borrow)]
        items: Vec<&'a RawValue>,
    }
    let t = Instant::now();
    let l: L = serde_json::from_slice(&bytes).unwrap();
    println!(
        "split raw items: {:?} ({} items)",
        t.elapsed(),
        l.items.len()
    );
    let t = Instant::now();
    let mut pods = 0;
    for it in &l.items {
        let v: serde::de::IgnoredAny = serde_json::from_str(it.get()).unwrap();
        let _ = v;
        pods += 1;
    }
    println!("ignoredany pass: {:?} {pods}", t.elapsed());
    let t = Instant::now();
    let mut n = 0;
    for it in &l.items {
        if it.get().contains("\"kind\":\"Pod\"") {
            let p: k8s_openapi::api::core::v1::Pod = serde_json::from_str(it.get()).unwrap();
            n += p.metadata.name.map(|x| x.len()).unwrap_or(0);
        }
    }
    println!("typed pods parse: {:?} {n}", t.elapsed());
    let t = Instant::now();
    let mut b = kube_descheduler::snapshot::SnapshotBuilder::new();
    for it in &l.items {
        if it.get().contains("\"kind\":\"Pod\"") {
            let p: k8s_openapi::api::core::v1::Pod = serde_json::from_str(it.get()).unwrap();
            b.add_pod(&p).unwrap();
        }
    }
    println!("typed parse + convert: {:?}", t.elapsed());
    let s = b.build();
    println!(
        "pods {} size_of Pod {}",
        s.pods.len(),
        std::mem::size_of::<kube_descheduler::snapshot::Pod>()
    );
    let st = std::fs::read_to_string("/proc/self/status").unwrap();
    println!(
        "{}",
        st.lines()
            .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    drop(l);
    drop(bytes);
    let st = std::fs::read_to_string("/proc/self/status").unwrap();
    println!(
        "after drop file: {}",
        st.lines()
            .filter(|l| l.starts_with("VmRSS"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}
