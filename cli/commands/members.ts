import { writeFile } from 'node:fs/promises'
import { Option, type Command } from 'commander'
import type { Member } from '../../shared/schemas/organisation.js'
import {
  actionOf,
  bodyWith,
  confirmDestructive,
  examples,
  withBodyOptions,
  type MakeDeps,
} from '../command.js'
import type { Deps } from '../deps.js'
import { apiError, decode } from '../client.js'
import { printFields, printTable, show } from '../output.js'
import { printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { idRef, memberId, roleId } from '../resolve.js'
import { about } from './about.js'
import { imageDataUrl } from './enterprise.js'
import type { Email } from '../../shared/schemas/mail.js'
import { safeText } from '../safe-text.js'

const columns = [
  { header: 'NAME', value: (m: Member) => m.name },
  { header: 'EMAIL', value: (m: Member) => m.email },
  { header: 'ROLES', value: (m: Member) => m.roles.map((r) => r.slug) },
  { header: 'TEAMS', value: (m: Member) => m.teams.map((t) => t.slug) },
  { header: 'LAST ASSIGNED', value: (m: Member) => m.lastAssignedAt },
  { header: 'ID', value: (m: Member) => m.id },
]

function showMember(deps: Deps, member: Member): void {
  show(deps.out, member, () =>
    printFields(deps.out, [
      ['name', member.name],
      ['email', member.email],
      ['id', member.id],
      ['persona', member.persona || '-'],
      ['roles', member.roles.map((r) => r.slug)],
      ['teams', member.teams.map((t) => t.slug)],
      ['picture', member.avatarUrl],
      ['last assigned', member.lastAssignedAt],
    ]),
  )
}

export async function listMembers(deps: Deps): Promise<void> {
  const members = await deps.client().get<Member[]>('/members')
  show(deps.out, members, () => printTable(deps.out, members, columns))
}

export async function getMember(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  showMember(deps, await client.get<Member>(`/members/${await memberId(client, ref)}`))
}

interface MemberFlags {
  name?: string
  email?: string
  persona?: string
  data?: string
  file?: string
}

export async function createMember(deps: Deps, opts: MemberFlags): Promise<void> {
  const body = await bodyWith(deps, opts, { name: opts.name, persona: opts.persona })
  showMember(deps, await deps.client().post<Member>('/members', body))
}

export async function updateMember(deps: Deps, ref: string, opts: MemberFlags): Promise<void> {
  const client = deps.client()
  const id = await memberId(client, ref)
  const body = await bodyWith(deps, opts, {
    name: opts.name,
    email: opts.email,
    persona: opts.persona,
  })
  showMember(deps, await client.patch<Member>(`/members/${id}`, body))
}

export async function deleteMember(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const client = deps.client()
  const id = await memberId(client, ref)
  await confirmDestructive(deps, opts.yes, `Remove member ${ref} (runs keep their history)`)
  await client.delete(`/members/${id}`)
  show(deps.out, { removed: id }, () => deps.out.write(`removed member ${ref}\n`))
}

export async function setAvatar(deps: Deps, ref: string, file: string): Promise<void> {
  const client = deps.client()
  const id = await memberId(client, ref)
  const answer = await client.put(`/members/${id}/avatar`, { dataUrl: await imageDataUrl(file) })
  show(deps.out, answer, () => deps.out.write(`picture of ${ref} set\n`))
}

/** Saves what a GET answers (bytes, not JSON) to a file, and says what it saved. */
async function download(deps: Deps, path: string, file: string): Promise<void> {
  const answer = await deps.client().raw('GET', path)
  if (answer.status !== 200) throw apiError(answer.status, decode(answer))
  await writeFile(file, answer.body)
  show(deps.out, { file, contentType: answer.contentType, bytes: answer.body.length }, () =>
    deps.out.write(`saved ${answer.contentType} (${answer.body.length} bytes) to ${file}\n`),
  )
}

/** Saves the picture to a file (it is the image itself, not JSON). */
export async function getAvatar(deps: Deps, ref: string, opts: { output: string }): Promise<void> {
  const client = deps.client()
  await download(deps, `/members/${await memberId(client, ref)}/avatar`, opts.output)
}

export async function clearAvatar(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  const client = deps.client()
  const id = await memberId(client, ref)
  await confirmDestructive(deps, opts.yes, `Remove the picture of ${ref}`)
  await client.delete(`/members/${id}/avatar`)
  show(deps.out, {}, () => deps.out.write(`picture of ${ref} removed\n`))
}

export async function grant(deps: Deps, member: string, role: string): Promise<void> {
  const client = deps.client()
  const id = await memberId(client, member)
  showMember(
    deps,
    await client.post<Member>(`/members/${id}/roles`, { roleId: await roleId(client, role) }),
  )
}

export async function revoke(deps: Deps, member: string, role: string): Promise<void> {
  const client = deps.client()
  const [mid, rid] = [await memberId(client, member), await roleId(client, role)]
  await client.delete(`/members/${mid}/roles/${rid}`)
  show(deps.out, { member: mid, revoked: rid }, () =>
    deps.out.write(`took ${role} from ${member}\n`),
  )
}

const idOf = (what: string, ref: string) => idRef(ref, `an ${what}`)

const emailColumns = [
  { header: 'RECEIVED', value: (e: Email) => e.receivedAt },
  { header: 'FROM', value: (e: Email) => e.from },
  { header: 'SUBJECT', value: (e: Email) => e.subject },
  { header: 'READ', value: (e: Email) => (e.read ? 'yes' : 'no') },
  { header: 'ID', value: (e: Email) => e.id },
]

/** A member's inbox, newest first, a page at a time (spec: GET /v1/members/{id}/emails). */
export async function listEmails(
  deps: Deps,
  ref: string,
  opts: PageFlags & { unread?: boolean },
): Promise<void> {
  const id = await memberId(deps.client(), ref)
  const filters = { unreadOnly: opts.unread ? 'true' : undefined }
  await printPaged(deps, `/members/${id}/emails`, filters, opts, emailColumns, 'emails')
}

/** One email, in full; opening it marks it read (spec: Retry safety of writes). */
export async function getEmail(deps: Deps, ref: string, emailRef: string): Promise<void> {
  const client = deps.client()
  const id = await memberId(client, ref)
  const email = await client.get<Email>(`/members/${id}/emails/${idOf('email', emailRef)}`)
  show(deps.out, email, () => {
    printFields(deps.out, [
      ['from', email.from],
      ['to', email.to],
      ['subject', email.subject],
      ['received', email.receivedAt],
      ['run', email.runId],
      ['id', email.id],
      [
        'attachments',
        email.attachments.length
          ? email.attachments.map(
              (a) => `${a.filename} (${a.contentType}, ${a.bytes} bytes, ${a.id})`,
            )
          : null,
      ],
    ])
    deps.out.write(`\n${safeText(email.body.trimEnd(), { multiline: true })}\n`)
  })
}

/** Saves an attachment to a file (it is the file itself, not JSON). */
export async function saveAttachment(
  deps: Deps,
  ref: string,
  emailRef: string,
  attachmentRef: string,
  opts: { output: string },
): Promise<void> {
  const client = deps.client()
  const id = await memberId(client, ref)
  const path = `/members/${id}/emails/${idOf('email', emailRef)}/attachments/${idOf('attachment', attachmentRef)}`
  await download(deps, path, opts.output)
}

export function registerMembers(program: Command, makeDeps: MakeDeps): void {
  const members = program.command('members').description(about.members)
  examples(
    members.command('list').description('every member').action(actionOf(makeDeps, listMembers)),
    'osctl members list',
  )
  examples(
    members
      .command('get')
      .argument('<member>', 'id, email or name')
      .description('one member')
      .action(actionOf(makeDeps, getMember)),
    'osctl members get ada@acme.osd.local',
  )
  examples(
    withBodyOptions(
      members
        .command('create')
        .description('create a member; the email is made from the name')
        .option('--name <name>')
        .option('--persona <text>'),
    ).action(actionOf(makeDeps, createMember)),
    'osctl members create --name "Ada" --persona "Careful reviewer"',
  )
  examples(
    withBodyOptions(
      members
        .command('update')
        .argument('<member>', 'id, email or name')
        .description('change name, email or persona')
        .option('--name <name>')
        .option('--email <email>')
        .option('--persona <text>'),
    ).action(actionOf(makeDeps, updateMember)),
    'osctl members update ada@acme.osd.local --persona "Terse"',
  )
  examples(
    members
      .command('delete')
      .argument('<member>', 'id, email or name')
      .option('-y, --yes', 'do not ask')
      .description('remove a member; runs keep their history')
      .action(actionOf(makeDeps, deleteMember)),
    'osctl members delete ada@acme.osd.local --yes',
  )
  const avatar = members.command('avatar').description("a member's picture")
  examples(
    avatar
      .command('set')
      .argument('<member>')
      .argument('<file>', 'png, jpeg, gif or webp')
      .description('set the picture')
      .action(actionOf(makeDeps, setAvatar)),
    'osctl members avatar set ada@acme.osd.local ada.png',
  )
  examples(
    avatar
      .command('get')
      .argument('<member>')
      .requiredOption('-o, --output <file>', 'where to save it')
      .description('save the picture')
      .action(actionOf(makeDeps, getAvatar)),
    'osctl members avatar get ada@acme.osd.local -o ada.png',
  )
  examples(
    avatar
      .command('clear')
      .argument('<member>')
      .option('-y, --yes', 'do not ask')
      .description('remove the picture')
      .action(actionOf(makeDeps, clearAvatar)),
    'osctl members avatar clear ada@acme.osd.local --yes',
  )
  examples(
    members
      .command('grant')
      .argument('<member>')
      .argument('<role>', 'id or slug')
      .description('grant a role')
      .action(actionOf(makeDeps, grant)),
    'osctl members grant ada@acme.osd.local reviewer',
  )
  examples(
    members
      .command('revoke')
      .argument('<member>')
      .argument('<role>', 'id or slug')
      .description('take a role away')
      .action(actionOf(makeDeps, revoke)),
    'osctl members revoke ada@acme.osd.local reviewer',
  )

  const emails = members.command('emails').description("a member's inbox")
  examples(
    withPageOptions(
      emails
        .command('list')
        .argument('<member>', 'id, email or name')
        .description('the inbox, newest first, a page at a time (--all for every one)')
        .option('--unread', 'unread emails only')
        .addOption(
          new Option('--order <order>', 'desc (default, newest first) or asc').choices([
            'asc',
            'desc',
          ]),
        ),
    ).action(actionOf(makeDeps, listEmails)),
    'osctl members emails list ada@acme.osd.local --unread',
    'osctl members emails list ada@acme.osd.local --all --json',
  )
  examples(
    emails
      .command('get')
      .argument('<member>', 'id, email or name')
      .argument('<email>', 'email id')
      .description('one email in full; opening it marks it read')
      .action(actionOf(makeDeps, getEmail)),
    'osctl members emails get ada@acme.osd.local 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    emails
      .command('attachment')
      .argument('<member>', 'id, email or name')
      .argument('<email>', 'email id')
      .argument('<attachment>', 'attachment id (see osctl members emails get)')
      .requiredOption('-o, --output <file>', 'where to save it')
      .description('save an attachment of an email')
      .action(actionOf(makeDeps, saveAttachment)),
    'osctl members emails attachment ada@acme.osd.local 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 5d1c2b3a-8e7f-4a6b-9c0d-1e2f3a4b5c6d -o invoice.pdf',
  )
}
