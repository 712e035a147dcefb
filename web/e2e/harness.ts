// Test harness: the real agentassistant-srv binary (with the embedded UI)
// on a free port, the real agentassistant-mcp binary behind the official
// MCP client over stdio, and Debian's Chromium driven by playwright-core.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

const BIN = resolve(__dirname, '../../bin')
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'

export interface Server {
  url: string
  host: string
  port: string
  token: string
  data: string
  proc: ChildProcess
  stop(): Promise<void>
  // kill9 kills it the hard way (no shutdown, no flush) and keeps its
  // data directory, to start it again there.
  kill9(): Promise<void>
}

// startServer runs agentassistant-srv on a free port. fileBlocks, when
// set, limits every file it writes to that many 512-byte blocks (the
// shell's ulimit -f): a full disk, without root. config, when set, is
// the server's TOML configuration. data, token and port, when set,
// start it again where one was.
export async function startServer(o: { fileBlocks?: number; config?: string; data?: string; token?: string; port?: string } = {}): Promise<Server> {
  const data = o.data ?? mkdtempSync(join(tmpdir(), 'aa-e2e-'))
  const token = o.token ?? 'e2e-' + Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2)
  let cmd = join(BIN, 'agentassistant-srv')
  let config = '/dev/null'
  if (o.config !== undefined) {
    config = join(data, 'agentassistant-srv.toml')
    writeFileSync(config, o.config)
  }
  let args = ['-port', o.port ?? '0', '-data', data, '-token', token, '-config', config]
  if (o.fileBlocks) {
    args = ['-c', `ulimit -f ${o.fileBlocks} && exec "$0" "$@"`, cmd, ...args]
    cmd = 'sh'
  }
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let log = ''
  proc.stderr!.on('data', (b) => (log += b))
  const url = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error('server printed no URL:\n' + log)), 10000)
    let out = ''
    proc.stdout!.on('data', (b) => {
      out += b
      const m = /http:\/\/\S+\/\?token=\S+/.exec(out)
      if (m) {
        clearTimeout(timer)
        ok(m[0])
      }
    })
    proc.on('exit', (c) => fail(new Error(`server exited ${c}:\n${log}`)))
  })
  const u = new URL(url)
  return {
    url: u.origin,
    host: u.hostname,
    port: u.port,
    token,
    data,
    proc,
    async stop() {
      proc.kill('SIGINT')
      await new Promise((r) => proc.once('exit', r))
      rmSync(data, { recursive: true, force: true })
    },
    async kill9() {
      proc.kill('SIGKILL')
      await new Promise((r) => proc.once('exit', r))
    },
  }
}

// startMCP runs agentassistant-mcp behind the MCP client; session names
// the relay session (-session) it drives.
export async function startMCP(s: Server, o: { session?: string } = {}): Promise<Client> {
  const home = mkdtempSync(join(tmpdir(), 'aa-home-'))
  const transport = new StdioClientTransport({
    command: join(BIN, 'agentassistant-mcp'),
    args: ['-host', s.host, '-port', s.port, '-token', s.token, ...(o.session ? ['-session', o.session] : [])],
    env: { HOME: home, XDG_CONFIG_HOME: home, PATH: process.env.PATH ?? '' },
    cwd: home,
    stderr: 'ignore',
  })
  const client = new Client({ name: 'e2e', version: '1.0.0' })
  client.onclose = () => rmSync(home, { recursive: true, force: true })
  await client.connect(transport)
  return client
}

export async function launch(extra: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', ...extra],
  })
}

// opened waits until the dialogs and menus open on page have finished
// their entering transition: a key pressed or a click made while one
// enters may be taken by nothing.
export async function opened(page: Page): Promise<void> {
  await page.locator('.q-dialog [class*="-enter-active"], .q-menu[class*="-enter-active"]').first().waitFor({ state: 'detached' })
}

export type ToolResult = { isError?: boolean; content: { type: string; text?: string; data?: string; mimeType?: string }[] }

export function text(r: ToolResult): string {
  return r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n')
}

// A 2x2 red PNG.
export const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==',
  'base64',
)

export const SHOTS = process.env.AA_SCREENSHOTS // directory for README screenshots, when set

// A loopback TCP proxy that can drop every connection and refuse new ones:
// a browser going offline and coming back; or take new ones and never
// answer: a network that loses every packet (a tunnel), where a
// connection stays connecting.
export interface Proxy {
  port: number
  setDown(down: boolean): void
  setHang(hang: boolean): void
  close(): Promise<void>
}

export async function startProxy(targetPort: number): Promise<Proxy> {
  const net = await import('node:net')
  const sockets = new Set<import('node:net').Socket>()
  let down = false
  let hang = false
  const server = net.createServer((client) => {
    if (down) return client.destroy()
    if (hang) {
      sockets.add(client)
      client.on('error', () => client.destroy()).on('close', () => sockets.delete(client))
      return
    }
    const up = net.connect(targetPort, '127.0.0.1')
    sockets.add(client)
    sockets.add(up)
    const drop = () => {
      client.destroy()
      up.destroy()
      sockets.delete(client)
      sockets.delete(up)
    }
    client.on('error', drop).on('close', drop)
    up.on('error', drop).on('close', drop)
    client.pipe(up)
    up.pipe(client)
  })
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
  return {
    port: (server.address() as import('node:net').AddressInfo).port,
    setDown(d: boolean) {
      down = d
      if (d) for (const s of sockets) s.resetAndDestroy()
    },
    setHang(h: boolean) {
      hang = h
    },
    close: () => new Promise<void>((ok) => {
      for (const s of sockets) s.destroy()
      server.close(() => ok())
    }),
  }
}

// photo draws a w×h picture with some grain in the page, as a PNG.
export async function photo(page: Page, w: number, h: number): Promise<Buffer> {
  const data = await page.evaluate(async ([w, h]) => {
    const c = new OffscreenCanvas(w, h)
    const g = c.getContext('2d')!
    const grad = g.createLinearGradient(0, 0, w, h)
    grad.addColorStop(0, '#1976d2')
    grad.addColorStop(1, '#f5a623')
    g.fillStyle = grad
    g.fillRect(0, 0, w, h)
    for (let i = 0; i < 20000; i++) {
      g.fillStyle = `hsl(${i % 360} 70% 50%)`
      g.fillRect((i * 7919) % w, (i * 104729) % h, 3, 3)
    }
    const b = await c.convertToBlob({ type: 'image/png' })
    const bytes = new Uint8Array(await b.arrayBuffer())
    let s = ''
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
    return btoa(s)
  }, [w, h])
  return Buffer.from(data, 'base64')
}
