//! A real full disk (a size-limited tmpfs; skipped with a message where the test cannot mount
//! one) under each kind of write: a replaced file keeps its old bytes, a log keeps every record
//! it had and takes the next one whole once there is space.

use onebrain_durable::{partial_path, write_atomic, AppendFile, Error, SmallDisk};

fn disk() -> Option<SmallDisk> {
    SmallDisk::mount(256 * 1024).map_err(|why| eprintln!("skipping: {why}")).ok()
}

#[test]
fn a_full_disk_keeps_the_old_file_and_names_the_new_one() {
    let Some(disk) = disk() else { return };
    let path = disk.path().join("report.json");
    write_atomic(&path, b"old").unwrap();
    disk.fill_to(8 * 1024).unwrap();
    let err = write_atomic(&path, vec![b'x'; 64 * 1024]).unwrap_err();
    assert!(matches!(&err, Error::DiskFull { path: p, .. } if p == &path), "{err}");
    assert!(err.to_string().contains("report.json: the disk is full"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    assert!(!partial_path(&path).exists(), "the partial file is removed, giving its space back");
    disk.unfill();
    write_atomic(&path, vec![b'x'; 64 * 1024]).unwrap();
    assert_eq!(std::fs::read(&path).unwrap().len(), 64 * 1024);
}

#[test]
fn a_failed_replacement_gives_its_space_back_even_while_another_process_holds_the_partial_file() {
    let Some(disk) = disk() else { return };
    let path = disk.path().join("trainer.safetensors");
    let empty = disk.available();
    let mut held = None;
    let err = onebrain_durable::replace_with(&path, |tmp| -> Result<(), Error> {
        std::fs::write(tmp, vec![b'x'; 128 * 1024]).unwrap();
        // What a child forked by another thread does until its exec: hold the file open.
        held = Some(std::fs::File::open(tmp).unwrap());
        Err(Error::write(tmp, std::io::Error::from(std::io::ErrorKind::StorageFull)))
    })
    .unwrap_err();
    assert!(err.is_disk_full(), "{err}");
    assert!(!partial_path(&path).exists());
    assert!(disk.available() + 16 * 1024 >= empty, "{} of {empty} bytes free", disk.available());
    drop(held);
}

#[test]
fn a_full_disk_cuts_a_partial_append_back_and_the_log_goes_on_whole() {
    let Some(disk) = disk() else { return };
    let path = disk.path().join("trace.jsonl");
    let mut log = AppendFile::open(&path).unwrap();
    log.append(b"{\"n\":1}\n").unwrap();
    disk.fill_to(4 * 1024).unwrap();
    // A record larger than the space left: part of it reaches the disk before ENOSPC.
    let big = format!("{{\"n\":2,\"text\":\"{}\"}}\n", "y".repeat(32 * 1024));
    let err = log.append(big.as_bytes()).unwrap_err();
    assert!(err.is_disk_full() && err.to_string().contains("trace.jsonl"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"n\":1}\n", "the partial record is cut back");
    // Once there is space the next record lands whole, on a line of its own.
    disk.unfill();
    log.append(big.as_bytes()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2);
    assert!(text.lines().all(serde_json_like), "{}", &text[..40]);
}

/// A line is one whole object (no JSON parser in this crate's tests).
fn serde_json_like(line: &str) -> bool {
    line.starts_with('{') && line.ends_with('}')
}
