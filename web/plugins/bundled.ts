// bundledPackages writes, at build time, the npm packages whose code or
// files the build put into its output: the module graph knows them,
// where a guess from package.json (dependencies the app may not import,
// none of what they import) would not. `make notices` reads the list
// and puts each package's licence into THIRD_PARTY_NOTICES.md, as their
// licences ask of whoever ships them; the minified bundle keeps none.
// (No node: imports: the UI's type check has no Node types; the
// bundler's own file system and string paths serve.)
import type { Plugin } from 'vite'

/** One npm package the build bundled. */
export interface BundledPackage {
  name: string
  version: string
  /** the package's directory, relative to the build's root (web/) */
  dir: string
  /**
   * the directories, relative to dir, of the files the build took from
   * it: a licence beside them (an icon set's in a package of many) is
   * theirs too
   */
  dirs: string[]
}

/** What a build writes to `.bundled/<build>.json` in its output. */
export interface BundledList {
  build: string
  packages: BundledPackage[]
}

// Code the bundler writes into the output from no file: each comes
// from the package named here.
const virtualOwners: [RegExp, string][] = [
  [/^vite\//, 'vite'], // vite/preload-helper, vite/modulepreload-polyfill
  [/^plugin-vue:/, '@vitejs/plugin-vue'], // the SFC export helper
  [/^rolldown\/runtime/, 'rolldown'],
  [/^commonjsHelpers\b/, 'vite'],
]

const styleSheet = /\.(css|sass|scss|less|styl|stylus|pcss|postcss)([?#]|$)/

/**
 * packageOf names the package a module id of the build belongs to: its
 * directory (relative to web/, down to the last node_modules/ of the
 * path: a nested copy is a package of its own) and its name. An id of our own sources is null. An id that
 * is neither a file nor a known helper is an error: a package the list
 * misses would go unnoticed.
 */
export function packageOf(
  id: string,
  root: string,
): { name: string; dir: string; sub: string } | null {
  let file = id.replace(/[?#].*$/, '').replaceAll('\\', '/')
  if (file.startsWith('\0')) {
    const name = file.slice(1)
    const owner = virtualOwners.find(([re]) => re.test(name))
    if (!owner) {
      throw new Error(`bundled: module ${JSON.stringify(name)} comes from no file and no known package`)
    }
    return { name: owner[1], dir: `node_modules/${owner[1]}`, sub: '.' }
  }
  const at = file.lastIndexOf('/node_modules/')
  if (at < 0) {
    const base = root.replaceAll('\\', '/').replace(/\/*$/, '/')
    if (!file.startsWith(base)) {
      throw new Error(`bundled: module ${file} is neither in ${root} nor in a package`)
    }
    return null
  }
  const parts = file.slice(at + '/node_modules/'.length).split('/')
  const name = parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]
  // From the first node_modules/ on: the package's place in web/'s tree,
  // wherever a linked node_modules really is.
  const first = file.indexOf('/node_modules/')
  const inside = parts.slice(name.split('/').length, -1).join('/')
  return {
    name,
    dir: file.slice(first + 1, at + '/node_modules/'.length) + name,
    sub: inside || '.',
  }
}

/**
 * bundledPackages lists what the build named `build` bundled, in
 * `.bundled/<build>.json` of its output directory (a dot-directory: the
 * server does not serve it, the service worker does not precache it).
 */
export function bundledPackages(build: string): Plugin {
  let root = ''
  return {
    name: 'agentassistant:bundled-packages',
    apply: 'build',
    configResolved(config) {
      root = config.root
    },
    async generateBundle(_options, bundle) {
      const found = new Map<string, BundledPackage & { subs: Set<string> }>()
      const add = async (id: string) => {
        const pkg = packageOf(id, root)
        if (!pkg) {
          return
        }
        const known = found.get(pkg.dir)
        if (known) {
          known.subs.add(pkg.sub)
          return
        }
        const manifest = `${root}/${pkg.dir}/package.json`
        let meta: { name?: string; version?: string }
        try {
          meta = JSON.parse(await this.fs.readFile(manifest, { encoding: 'utf8' }))
        } catch (e) {
          throw new Error(`bundled: read ${manifest} for ${id}: ${String(e)}`, { cause: e })
        }
        if (meta.name !== pkg.name || !meta.version) {
          throw new Error(`bundled: ${manifest} names ${meta.name}@${meta.version}, not ${pkg.name}`)
        }
        found.set(pkg.dir, {
          name: pkg.name,
          version: meta.version,
          dir: pkg.dir,
          dirs: [],
          subs: new Set([pkg.sub]),
        })
      }
      for (const out of Object.values(bundle)) {
        if (out.type === 'chunk') {
          // A module tree-shaken to nothing ships nothing; a style
          // sheet renders no script, yet its rules are in the CSS.
          for (const id of out.moduleIds) {
            if (out.modules[id].renderedLength > 0 || styleSheet.test(id)) {
              await add(id)
            }
          }
        } else {
          // Fonts, images and CSS a package's files became.
          for (const file of out.originalFileNames ?? []) {
            await add(file.startsWith('/') || /^[a-zA-Z]:/.test(file) ? file : `${root}/${file}`)
          }
        }
      }
      const list: BundledList = {
        build,
        packages: [...found.values()]
          .map(({ subs, ...pkg }) => ({ ...pkg, dirs: [...subs].sort() }))
          .sort((a, b) => a.name.localeCompare(b.name) || a.dir.localeCompare(b.dir)),
      }
      this.emitFile({
        type: 'asset',
        fileName: `.bundled/${build}.json`,
        source: JSON.stringify(list, null, 2) + '\n',
      })
    },
  }
}
