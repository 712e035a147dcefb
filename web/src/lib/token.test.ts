import { describe, expect, it } from 'vitest'
import { pastedToken, tokenProtocols } from './token'

describe('tokenProtocols', () => {
  it('offers the plain subprotocol and the token base64url-encoded, as the server decodes it', () => {
    for (const token of ['room-A-token-0001', 'a token with spaces, commas; and é', '>>>???///+++']) {
      const [plain, carrier] = tokenProtocols(token)
      expect(plain).toBe('agentassistant')
      expect(carrier.startsWith('agentassistant.bearer.')).toBe(true)
      const enc = carrier.slice('agentassistant.bearer.'.length)
      // Only characters a subprotocol (an RFC 7230 token) may hold.
      expect(enc).toMatch(/^[A-Za-z0-9_-]+$/)
      const bin = atob(enc.replace(/-/g, '+').replace(/_/g, '/'))
      expect(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)))).toBe(token)
    }
  })
})

describe('pastedToken', () => {
  it('reads the token from the URL the server printed, or takes the token itself', () => {
    expect(pastedToken('http://127.0.0.1:22080/?token=sV4PSTbYoRaFOufGZDMeTEWND_dlaDvf')).toBe('sV4PSTbYoRaFOufGZDMeTEWND_dlaDvf')
    expect(pastedToken('  https://inbox.example.org/?a=1&token=abc%2Bdef#x ')).toBe('abc+def')
    expect(pastedToken('http://10.0.0.2:22080/#token=frag-token')).toBe('frag-token')
    expect(pastedToken(' sV4PSTbYoRaFOufGZDMeTEWND_dlaDvf\n')).toBe('sV4PSTbYoRaFOufGZDMeTEWND_dlaDvf')
    expect(pastedToken('http://127.0.0.1:22080/')).toBe('')
    expect(pastedToken('two words')).toBe('')
    expect(pastedToken('   ')).toBe('')
  })
})
