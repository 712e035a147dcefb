package main

// A component is one piece of third-party software the release ships.
type component struct {
	kind    string // kindGo, kindModule or kindNPM
	name    string
	version string
	// root is the component's directory: a module's in the module
	// cache, a package's in node_modules.
	root string
	// dirs are the directories under root (relative, "." for root
	// itself) of what was linked or bundled: a licence file in one of
	// them, or in a directory between it and root, is the component's.
	dirs []string
	// declared is the licence an npm package's package.json names; a
	// text supplied for a package that ships none must be for it.
	declared string
}

const (
	kindGo     = "Go toolchain"
	kindModule = "Go module"
	kindNPM    = "npm package"
)

// A notice is a component with the texts the release must carry for it.
type notice struct {
	component
	files []licenceFile
}

type licenceFile struct {
	name string // relative to the component's root, or where it was supplied from
	text string
}
