// Package audio reads call recordings for the transcription jobs: it turns
// what a user typed into a bucket key that cannot leave the recordings root,
// computes the SHA-256 that the business key is built from, reads WAV
// durations, and hands speech vendors a URL they can fetch.
//
// # Where recordings live
//
// Recordings are objects in a gocloud.dev/blob bucket named by
// Config.URL: a local directory ("file:///var/recordings", or a plain
// path), an S3 bucket ("s3://bucket?region=us-east-1"), a Google Cloud
// Storage bucket ("gs://bucket") or an Azure Blob Storage container
// ("azblob://container"). Credentials for the cloud schemes come from the
// environment, the way each provider's SDK finds them, never from the URL:
// a URL with user information is refused, and error messages name the root
// without its query.
//
// # What it guarantees
//
//   - Store.Key refuses any path that leaves the root: "..", an absolute
//     path or file:// URL elsewhere. For a directory root, a key is also
//     confined to its first element, the tenant's directory
//     ("northline/..."; the root itself for a one-element key): every stat,
//     open and remove goes through an os.Root opened on that directory, so
//     a symbolic link (to a file or to a directory) that leads out of it is
//     refused even when its target is inside the root, as is a link with an
//     absolute target and a tenant directory that is itself a link. Links
//     that stay inside the tenant's directory are followed. Every other
//     method checks its key the same way, so a key that did not come from
//     Key is held to the same rule. The refusal is a *KeyError naming the
//     path (relative to the root) and the root, never the link's target.
//   - Store.Inspect reads an object once, in one pass: the SHA-256, the
//     size and the WAV header all come from the same stream. Nothing larger
//     than Config.MaxBytes is read past the limit: an object whose stated
//     size is over the limit is refused before the first byte, and a stream
//     that runs past it is cut off after MaxBytes+1 bytes. Either way the
//     error is a *TooLargeError (errors.Is(err, ErrTooLarge)).
//   - For a directory root, only regular files are recordings: a
//     directory, named pipe (FIFO), socket or device is refused at once
//     with a *KeyError (Reason KeyNotRegular) naming the key. The path is
//     checked with stat before it is opened and the open does not block
//     (O_NONBLOCK), so a FIFO cannot hang a read.
//   - Store.Inspect checks the container a recording's extension claims
//     against its first bytes (Containers lists the table): a ".wav" that is
//     not RIFF/WAVE, an ".mp3" that is neither an ID3 tag nor an MPEG frame,
//     and so on, is a *FormatError (errors.Is(err, ErrFormat)). A RIFF/WAVE
//     file whose header cannot be measured is still taken, with its duration
//     unknown. A recording with an extension not in the table (or none) is
//     read as it is, unchecked.
//   - A missing object is ErrNotFound (errors.Is); other failures name the
//     key and the root.
//   - ParseWAV never allocates from a size the file declares: chunks it does
//     not need are skipped by reading through them, not by buffering them.
//
// # What it does not do
//
// It does not write, list or delete recordings, decode audio samples,
// resample, or check that a WAV's data matches its declared format beyond
// what the duration needs. It does not cache: each Inspect reads the object
// again. For a directory root the reads, stats and removes themselves go
// through os.Root, so a link swapped in after a key was checked cannot lead
// them out of the tenant's directory; Store.URL's file:// URL, though, is a
// plain path, and whoever opens it later follows whatever links are there
// then.
package audio
