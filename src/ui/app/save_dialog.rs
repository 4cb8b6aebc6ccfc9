//! The save dialog for screenshots, on a thread of its own so that the window keeps
//! drawing; its results come back through a bounded channel.

use std::path::PathBuf;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::ui::screenshot::{self, Shot};
use lrbc_live::sampler::ImageFrame;

pub(super) fn saved_text(paths: &[PathBuf]) -> String {
    match paths {
        [one] => format!("screenshot saved to {}", one.display()),
        many => format!(
            "{} screenshots saved to {}",
            many.len(),
            many.first()
                .and_then(|p| p.parent())
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ),
    }
}

/// What one dialog gives back: the files written (none when cancelled), or why not.
pub type SaveResult = Result<Vec<PathBuf>, String>;

/// Starts save dialogs on their own threads and collects their results.
#[derive(Debug)]
pub struct SaveDialogs {
    tx: Sender<SaveResult>,
    rx: Receiver<SaveResult>,
}

impl Default for SaveDialogs {
    fn default() -> Self {
        let (tx, rx) = bounded(8);
        Self { tx, rx }
    }
}

impl SaveDialogs {
    /// Asks where to save `shot` of `frame` (a folder for every env's image, else a file
    /// named `name` in `dir`) and saves it there, on a thread named `lrbc-save-dialog`.
    pub fn open(
        &self,
        frame: ImageFrame,
        shot: Shot,
        dir: PathBuf,
        name: String,
        columns: u32,
    ) -> std::io::Result<()> {
        let tx = self.tx.clone();
        std::thread::Builder::new()
            .name("lrbc-save-dialog".into())
            .spawn(move || {
                let dialog = rfd::FileDialog::new().set_directory(&dir);
                let picked = match shot {
                    Shot::AllEnvs => dialog.set_title("Folder for every env's image").pick_folder(),
                    _ => dialog.set_title("Save screenshot").set_file_name(&name).add_filter("PNG", &["png"]).save_file(),
                };
                let result = match picked {
                    Some(path) => screenshot::save_to(&frame, shot, &path, columns),
                    None => Err(format!(
                        "no file chosen (the save dialog did not open or was cancelled); quick save writes to {} without one",
                        dir.display()
                    )),
                };
                // The receiver is gone: nobody waits for this any more.
                let _ = tx.send(result);
            })
            .map(drop)
    }

    /// The results of the dialogs that have closed since the last call.
    pub fn results(&self) -> impl Iterator<Item = SaveResult> + '_ {
        self.rx.try_iter()
    }
}
