import { ref } from 'vue'

export type Locale = 'en' | 'zh'

const dict = {
  en: {
    appTitle: 'Agent Assistant',
    online: 'Online',
    connecting: 'Connecting…',
    offline: 'Offline, reconnecting',
    refused: 'Token refused',
    noToken: 'Open this page with the URL agentassistant-srv printed (it ends in ?token=…).',
    refusedHelp: 'The server refused this token. Open the URL agentassistant-srv printed.',
    empty: 'No questions yet. When an agent calls ask_question or task_finish, it shows up here.',
    question: 'Question',
    taskDone: 'Task finished',
    waiting: 'Waiting for you',
    answeredHere: 'Answered here',
    answeredElsewhere: 'Answered on another device',
    cancelled: 'Withdrawn by the agent',
    timedOut: 'Timed out',
    closed: 'No longer waiting',
    replyTo: 'Replying to',
    replyPlaceholder: 'Type your answer… (Ctrl+Enter to send)',
    send: 'Send',
    attach: 'Attach image',
    nothingToAnswer: 'Nothing is waiting for an answer.',
    quick: ['Yes', 'No', 'Go ahead', 'Stop and wait'],
    quickTask: ['Thanks, done', 'Please continue', 'Run the tests again'],
    you: 'You',
    by: 'by',
    users: 'Online',
    chatWith: 'Chat with',
    chatPlaceholder: 'Message…',
    settings: 'Settings',
    nickname: 'Nickname',
    notifications: 'Desktop notifications',
    sound: 'Sound',
    language: 'Language',
    clearHistory: 'Clear history',
    older: 'Load older',
    allProjects: 'All projects',
    noProject: '(no project)',
    notAnswered: 'The answer was not accepted',
    imageTooBig: 'Image too large (max 8 MB)',
    newQuestion: 'New question from your agent',
    copy: 'Copy',
    booking: 'Booking',
    inbox: 'Inbox',
    typeOn: 'Type on',
    typeOnHint: "Dictate with your keyboard's microphone; the text is typed where the cursor is on that PC.",
    typeOnPlaceholder: 'Say or type the text… (Ctrl+Enter to send)',
    undoLast: 'Undo last',
    clearTyped: 'Clear',
    pressEnter: 'Enter',
    notDelivered: 'Not delivered',
  },
  zh: {
    appTitle: 'Agent 助手',
    online: '在线',
    connecting: '连接中…',
    offline: '已断开，正在重连',
    refused: '令牌被拒绝',
    noToken: '请用 agentassistant-srv 打印的链接打开本页（以 ?token=… 结尾）。',
    refusedHelp: '服务器拒绝了此令牌。请打开 agentassistant-srv 打印的链接。',
    empty: '还没有问题。Agent 调用 ask_question 或 task_finish 时会显示在这里。',
    question: '提问',
    taskDone: '任务完成',
    waiting: '等待回复',
    answeredHere: '已在此回复',
    answeredElsewhere: '已在其他设备回复',
    cancelled: 'Agent 已撤回',
    timedOut: '已超时',
    closed: '不再等待',
    replyTo: '回复',
    replyPlaceholder: '输入回复…（Ctrl+Enter 发送）',
    send: '发送',
    attach: '添加图片',
    nothingToAnswer: '没有待回复的消息。',
    quick: ['是', '否', '继续', '先停下等我'],
    quickTask: ['好的，完成', '请继续', '再跑一遍测试'],
    you: '我',
    by: '来自',
    users: '在线',
    chatWith: '聊天：',
    chatPlaceholder: '消息…',
    settings: '设置',
    nickname: '昵称',
    notifications: '桌面通知',
    sound: '提示音',
    language: '语言',
    clearHistory: '清除历史',
    older: '加载更早的',
    allProjects: '全部项目',
    noProject: '（无项目）',
    notAnswered: '回复未被接受',
    imageTooBig: '图片太大（最大 8 MB）',
    newQuestion: '你的 Agent 有新问题',
    copy: '复制',
    booking: '订票',
    inbox: '收件箱',
    typeOn: '输入到',
    typeOnHint: '用键盘上的麦克风听写；文字会输入到那台电脑的光标处。',
    typeOnPlaceholder: '说出或输入文字…（Ctrl+Enter 发送）',
    undoLast: '撤销上一条',
    clearTyped: '清除',
    pressEnter: '回车',
    notDelivered: '未送达',
  },
} as const

export type Key = keyof (typeof dict)['en']

function initial(): Locale {
  const saved = localStorage.getItem('aa.locale')
  if (saved === 'en' || saved === 'zh') return saved
  return navigator.language.toLowerCase().startsWith('zh') ? 'zh' : 'en'
}

export const locale = ref<Locale>(initial())

export function setLocale(l: Locale) {
  locale.value = l
  localStorage.setItem('aa.locale', l)
  document.documentElement.lang = l === 'zh' ? 'zh-CN' : 'en'
}

export function t<K extends Key>(k: K): (typeof dict)['en'][K] {
  return dict[locale.value][k] as (typeof dict)['en'][K]
}
