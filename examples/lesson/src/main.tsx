// The lesson page, in React: a lesson video
// whose playback progress the agent reads with the read_playback_progress
// client tool, and the lesson being watched as page context. Served from
// the example site at /lesson/ (its own thread, th_lesson, unless ?thread=
// names another), beside the gateway (/toolgate/)
// and the bookmarks component (/app/), which signs the user in and mints
// the page tokens.
import { StrictMode, useEffect, useImperativeHandle, useMemo, useRef, useState, type Ref } from "react";
import { createRoot } from "react-dom/client";
import {
  ToolgateCard, ToolgateClient, useToolgateReadable, useToolgateTool,
  type Answer, type ToolChange, type ToolgateLog,
} from "@toolgate/react";

const gateway = "/toolgate";
const thread = new URLSearchParams(location.search).get("thread") || "th_lesson";

interface Lesson {
  number: number;
  title: string;
  durationSeconds: number;
}

const lessons: Lesson[] = [
  { number: 1, title: "Values and variables", durationSeconds: 412 },
  { number: 2, title: "Functions", durationSeconds: 538 },
  { number: 3, title: "Closures", durationSeconds: 605 },
];

/** The two properties of an HTMLVideoElement the client tool reads. */
interface Playback {
  readonly currentTime: number;
  readonly duration: number;
}

/**
 * A stand-in for <video>: the example ships no video file, so this player
 * keeps a position that its seek bar sets and its Play button advances.
 * Its ref has the two properties the tool reads, as a video's would.
 */
function Player({ lesson, ref }: { lesson: Lesson; ref: Ref<Playback> }) {
  const [position, setPosition] = useState(0);
  const [playing, setPlaying] = useState(false);
  useImperativeHandle(ref, () => ({ currentTime: position, duration: lesson.durationSeconds }), [position, lesson]);
  useEffect(() => setPosition(0), [lesson]);
  useEffect(() => {
    if (!playing) return;
    const t = setInterval(() => setPosition((p) => Math.min(p + 1, lesson.durationSeconds)), 1000);
    return () => clearInterval(t);
  }, [playing, lesson]);
  return (
    <div className="player">
      <strong>Lesson {lesson.number}: {lesson.title}</strong>
      <input type="range" aria-label="Position" min={0} max={lesson.durationSeconds} value={position}
        onChange={(e) => setPosition(Number(e.target.value))} />
      <button type="button" onClick={() => setPlaying(!playing)}>{playing ? "Pause" : "Play"}</button>{" "}
      <span className="meta">{position} s of {lesson.durationSeconds} s</span>
    </div>
  );
}

/** The page's part of the conversation: a fact (useToolgateReadable) and a client tool (useToolgateTool). */
function LessonBridge({ lesson, player }: { lesson: Lesson; player: { current: Playback | null } }) {
  // Page context: updated when the lesson changes, removed on unmount.
  useToolgateReadable("lesson", `Watching lesson ${lesson.number}: ${lesson.title}`);

  // A client tool: unregistered on unmount. The handler reads the player
  // when the agent calls, so it always answers with the position then.
  useToolgateTool("read_playback_progress", () => ({
    positionSeconds: player.current?.currentTime ?? 0,
    durationSeconds: player.current?.duration ?? 0,
  }));
  return null;
}

/**
 * The app's own login and token endpoint are the bookmarks component's
 * (examples/bookmarks/page.go): /app/page signs the demo user in with a
 * session cookie, /app/page-token mints a page token for that user, their
 * installation and a thread. getToken signs in when there is no session yet.
 */
async function pageToken(): Promise<{ token: string; user: string; install: string }> {
  const url = `/app/page-token?thread=${encodeURIComponent(thread)}`;
  let r = await fetch(url);
  if (r.status === 401) {
    await fetch("/app/page");
    r = await fetch(url);
  }
  if (!r.ok) throw new Error(`page token: ${r.status}`);
  return r.json();
}

function LessonPage() {
  const [lesson, setLesson] = useState(lessons[2]!);
  // The identity the cards resume as, the page token's: without a callers
  // block the gateway trusts this machine and the envelope names the user.
  const [identity, setIdentity] = useState<{ user: string; install: string } | undefined>();
  const [events, setEvents] = useState<string[]>([]);
  const [answers, setAnswers] = useState<Answer[]>([]);
  const [resolved, setResolved] = useState<Answer | null>(null);
  const player = useRef<Playback>(null);
  const log = (line: string) => setEvents((e) => [...e, line]);

  // Stable: a new options object would reopen the call stream.
  // It runs read_playback_progress only: another page's client tools are
  // left for that page.
  const options = useMemo(() => ({ api: { url: gateway }, threadId: thread, tools: ["read_playback_progress"] }), []);

  // The example has no agent runtime: the browser test (or you, in the
  // console) plays it, calling tools through the Tools API and handing their
  // answers here, as an app's chat gets them from its runtime.
  useEffect(() => {
    const w = window as unknown as { showAnswer?: (a: Answer) => void };
    w.showAnswer = (a) => setAnswers((list) => [...list, a]);
    return () => {
      delete w.showAnswer;
    };
  }, []);

  return (
    <>
      <h1>Lesson</h1>
      <p className="meta">
        Thread <code>{thread}</code>. The agent reads the player with the <code>read_playback_progress</code> client
        tool, and each message carries the lesson as page context.
      </p>
      <nav>
        {lessons.map((l) => (
          <button key={l.number} type="button" aria-current={l === lesson} onClick={() => setLesson(l)}>
            Lesson {l.number}
          </button>
        ))}
      </nav>
      <Player lesson={lesson} ref={player} />

      <ToolgateClient
        options={options}
        getToken={async () => {
          const t = await pageToken();
          setIdentity({ user: t.user, install: t.install });
          return t.token;
        }}
        onToolChange={(e: CustomEvent<ToolChange>) => {
          const d = e.detail;
          log(`tool ${d.name} ${d.status}${d.status === "end" ? (d.isError ? " (error)" : " (ok)") : ""} ${d.id}`);
        }}
        onLog={(e: CustomEvent<ToolgateLog>) => log(`${e.detail.level}: ${e.detail.message}`)}
      >
        <LessonBridge lesson={lesson} player={player} />
      </ToolgateClient>

      <h2>Assistant</h2>
      {answers.map((a) => (
        <ToolgateCard key={a.callId} answer={a} gateway={gateway} identity={identity}
          onResolved={(e) => setResolved(e.detail)} onError={(e) => log(`card: ${e.detail.message}`)} />
      ))}
      <p id="resolved" role="status">{resolved ? `Resolved: ${resolved.content}` : ""}</p>

      <h2>Events</h2>
      <div id="events">{events.join("\n")}</div>
    </>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <LessonPage />
  </StrictMode>,
);
