// Command modproxy writes a Go module proxy on disk holding every published
// module of this repository at one version, as a release would tag it, so
// that a scratch module can resolve them with GOPROXY=file://DIR and no
// replace (see scripts/consumer.sh and `make consumer`).
//
// Usage:
//
//	go run ./cmd/modproxy -root REPO -version v0.1.0 -out DIR
//	go run ./cmd/modproxy -root REPO -version v0.1.0 -check
//
// A published module is a directory of REPO holding a go.mod, except those
// under -exclude (examples, benchmarks and internal by default), hidden
// directories and testdata. For each it writes
// DIR/<escaped path>/@v/{list,VERSION.info,VERSION.mod,VERSION.zip}: the .mod
// file is the module's go.mod as it stands, requirements and replace lines
// included (Go ignores a dependency's replace lines, as it will once
// published), and the zip is golang.org/x/mod/zip's, of the files git would
// commit from the working tree (ignored files left out), without nested
// modules and vendor directories, as the go command makes it from a tag.
// It prints each module's path, one a line.
//
// With -check it writes nothing and fails, naming each, if a published
// module requires a module of the repository at a version other than
// -version: a version the release does not tag, which a user may not see
// fail (a higher requirement elsewhere in the graph can hide it) but must
// not be published.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	root := flag.String("root", ".", "the repository's top directory")
	version := flag.String("version", "", "the release version, e.g. v0.1.0")
	out := flag.String("out", "", "the proxy directory to write (created if missing)")
	exclude := flag.String("exclude", "examples,benchmarks,internal", "comma-separated directories of -root whose modules are not published")
	check := flag.Bool("check", false, "check the requirements between the repository's modules instead of writing a proxy")
	flag.Parse()
	run := write
	if *check {
		run = checkRequirements
	}
	if err := run(*root, *version, *out, strings.Split(*exclude, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// write finds the published modules of root and writes each to the proxy
// directory out at version.
func write(root, version, out string, exclude []string) error {
	if out == "" {
		return errors.New("-out is required")
	}
	dirs, err := published(root, version, exclude)
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		path, err := writeModule(dir, version, out)
		if err != nil {
			return fmt.Errorf("module in %s: %w", dir, err)
		}
		fmt.Println(path)
	}
	return nil
}

// checkRequirements fails, naming each, if a published module of root
// requires a module of the repository (root's module path or one below it)
// at a version other than version.
func checkRequirements(root, version, _ string, exclude []string) error {
	dirs, err := published(root, version, exclude)
	if err != nil {
		return err
	}
	top, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	base := modfile.ModulePath(top)
	var stale []string
	for _, dir := range dirs {
		file := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		f, err := modfile.ParseLax(file, data, nil)
		if err != nil {
			return err
		}
		for _, r := range f.Require {
			own := r.Mod.Path == base || strings.HasPrefix(r.Mod.Path, base+"/")
			if own && r.Mod.Version != version {
				rel, _ := filepath.Rel(root, file)
				stale = append(stale, fmt.Sprintf("%s requires %s", filepath.ToSlash(rel), r.Mod))
			}
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("requirements at a version the release (%s) does not tag:\n\t%s", version, strings.Join(stale, "\n\t"))
	}
	return nil
}

// published returns the directories of root's published modules, after
// checking that version is one a release can tag.
func published(root, version string, exclude []string) ([]string, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return nil, fmt.Errorf("-version %q is not a canonical semantic version such as v0.1.0", version)
	}
	dirs, err := publishedModules(root, exclude)
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no go.mod found under %s", root)
	}
	return dirs, nil
}

// publishedModules returns the directories of root holding a go.mod, in
// lexical order, leaving out hidden directories, testdata and the
// directories of exclude (relative to root) with everything below them.
func publishedModules(root string, exclude []string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name := d.Name()
		if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || slices.Contains(exclude, filepath.ToSlash(rel))) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs, err
}

// writeModule writes the module of dir at version into the proxy out and
// returns its path.
func writeModule(dir, version, out string) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return "", errors.New("go.mod has no module line")
	}
	mv := module.Version{Path: path, Version: version}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return "", err
	}
	files := map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  gomod,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return path, writeZip(filepath.Join(vdir, version+".zip"), mv, dir)
}

// writeZip writes the module zip of mv, made from dir's files as a commit
// of the working tree would hold them, to file.
func writeZip(file string, mv module.Version, dir string) (err error) {
	files, err := workingFiles(dir)
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	// Create leaves out nested modules' files and vendor directories, as
	// the go command does.
	return zip.Create(f, mv, files)
}

// workingFiles lists dir's files that a commit of the working tree would
// hold: tracked and untracked ones, not those git ignores nor git's own
// (a worktree's .git file, build output), which a tag's zip never holds.
func workingFiles(dir string) ([]zip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing files with git ls-files: %w", err)
	}
	var files []zip.File
	for _, rel := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return nil, err
		}
		if info.Mode().IsRegular() {
			files = append(files, diskFile{slash: rel, path: path, info: info})
		}
	}
	return files, nil
}

// diskFile is a zip.File read from disk.
type diskFile struct {
	slash, path string
	info        fs.FileInfo
}

func (f diskFile) Path() string                 { return f.slash }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }
