import { Marked } from 'marked'
import DOMPurify from 'dompurify'
import { i18n } from './i18n'

const md = new Marked({ gfm: true, breaks: true })

// Agents' markdown is rendered, then sanitized: no script, no event
// handlers, no javascript: URLs, links open in a new tab without referrer.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank')
    node.setAttribute('rel', 'noopener noreferrer')
  }
})

// The page shows only inline images (data:, blob:), which it already
// holds. It never fetches one from elsewhere: that would tell the image's
// host that the person is reading (and its CSP would show it broken), and a
// relative one would ask this server for a file it does not have. An
// image with a web address becomes a link the person may open, saying it
// is an image that was not loaded; any other becomes a note, in place,
// that an image was left out. Both are named by the alt text.
const shown = /^(data:image\/|blob:)/i

export function renderMarkdown(src: string): string {
  const html = md.parse(src, { async: false }) as string
  const doc = DOMPurify.sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
    FORBID_ATTR: ['style'],
    RETURN_DOM_FRAGMENT: true,
  })
  const { t } = i18n.global
  for (const img of Array.from(doc.querySelectorAll('img'))) {
    const at = img.getAttribute('src') ?? ''
    if (shown.test(at)) continue
    let host = ''
    try {
      const u = new URL(at)
      if (u.protocol === 'https:' || u.protocol === 'http:') host = u.host
    } catch {
      /* not an absolute address: left out */
    }
    const name = img.getAttribute('alt')?.trim() || img.getAttribute('title')?.trim() || (host ? at : '')
    let out: HTMLElement
    if (host && !img.closest('a')) {
      out = document.createElement('a')
      out.setAttribute('href', at)
      out.setAttribute('target', '_blank')
      out.setAttribute('rel', 'noopener noreferrer')
      out.setAttribute('data-image', 'link')
      out.textContent = t('item.imageLink', { name, host })
    } else {
      out = document.createElement('span')
      out.setAttribute('data-image', 'left-out')
      out.textContent = host ? t('item.imageLink', { name, host }) : name ? t('item.imageLeftOut', { name }) : t('item.imageLeftOutUnnamed')
    }
    out.className = 'aa-img-out'
    img.replaceWith(out)
  }
  // Each block takes its direction from its own first letter: a line in
  // Arabic or Hebrew reads right to left, the English beside it does not.
  for (const b of Array.from(doc.querySelectorAll('p, li, h1, h2, h3, h4, h5, h6, blockquote, td, th'))) b.setAttribute('dir', 'auto')
  const box = document.createElement('div')
  box.append(doc)
  return box.innerHTML
}
