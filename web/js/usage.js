// Usage and budgets in the project panel: the caller's tokens and turns for a day or a
// month (today and this month first, earlier ones a step at a time) beside their budget and
// what remains, every member's for an owner (each with a small form to set or clear their
// budget), and memory upkeep, the background jobs' model usage. A turn refused for budget
// is said in the same words in the chat.
import { showNote } from "./alerts.js";
import { ApiError, enc, get, send } from "./api.js";
import { $, el, when } from "./dom.js";

const LIMITS = [
  ["turnsPerDay", "Turns per day"],
  ["turnsPerMonth", "Turns per month"],
  ["tokensPerDay", "Tokens per day"],
  ["tokensPerMonth", "Tokens per month"],
];
const LIMIT_WORDS = {
  turnsPerDay: ["turns", "a day", "today"],
  turnsPerMonth: ["turns", "a month", "this month"],
  tokensPerDay: ["tokens", "a day", "today"],
  tokensPerMonth: ["tokens", "a month", "this month"],
};
const JOBS = [
  ["extraction", "Memory extraction"],
  ["summary", "Rolling summaries"],
  ["consolidation", "Consolidation"],
];

const count = (value) => Number(value || 0).toLocaleString();
/** "1 turn", "3 turns": the unit's plural is the one given. */
const counted = (value, plural) => `${count(value)} ${Number(value) === 1 ? plural.slice(0, -1) : plural}`;

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January", "February", "March", "April", "May", "June",
  "July", "August", "September", "October", "November", "December",
];

// `date` is null on the current period (asked without `date=`, so the API's clock decides),
// else the earlier day (YYYY-MM-DD) or month (YYYY-MM) shown. `today` and `thisMonth` are
// the current periods as the API last named them; until it has, the browser's UTC clock.
const shown = { period: "day", date: null, project: null, today: null, thisMonth: null, asked: 0 };

const today = () => shown.today || new Date().toISOString().slice(0, 10);
const thisMonth = () => shown.thisMonth || today().slice(0, 7);
const current = (period) => (period === "day" ? today() : thisMonth());

/** The day or month `by` steps from `date` (UTC calendar; a month step lands on its first). */
function step(period, date, by) {
  const [year, month, day] = date.split("-").map(Number);
  const moment = period === "day" ? new Date(Date.UTC(year, month - 1, day + by)) : new Date(Date.UTC(year, month - 1 + by, 1));
  return moment.toISOString().slice(0, period === "day" ? 10 : 7);
}

/** The last day of a month, "2026-10" → "2026-10-31". */
const lastDay = (month) => step("day", `${step("month", month, 1)}-01`, -1);

/** "Sunday 29 November 2026" or "October 2026": an earlier period in words. */
function dateWords(period, date) {
  const [year, month, day] = date.split("-").map(Number);
  if (period === "month") return `${MONTHS[month - 1]} ${year}`;
  return `${WEEKDAYS[new Date(Date.UTC(year, month - 1, day)).getUTCDay()]} ${day} ${MONTHS[month - 1]} ${year}`;
}

/** The panel's heading: "Today (2026-11-30, UTC)", or "Sunday 29 November 2026 (UTC)". */
function periodWords(period, date, isCurrent) {
  if (!isCurrent) return `${dateWords(period, date)} (UTC)`;
  return `${period === "day" ? "Today" : "This month"} (${date}, UTC)`;
}

/** The words for a turn refused with 429 budget_exceeded, or null for any other error. */
export function budgetRefusal(error) {
  if (!(error instanceof ApiError) || error.code !== "budget_exceeded") return null;
  const detail = error.details.find((found) => LIMIT_WORDS[found.limit]) || {};
  const resetsAt =
    detail.resetsAt || (error.retryAfter ? new Date(Date.now() + Number(error.retryAfter) * 1000).toISOString() : null);
  const resets = resetsAt ? `; it resets at ${when(resetsAt)}.` : ".";
  const words = LIMIT_WORDS[detail.limit];
  if (!words) return `${error.message.replace(/\.$/, "")}${resets}`;
  const [unit, , span] = words;
  if (unit === "turns" || detail.used === undefined || Number(detail.used) <= Number(detail.budget)) {
    return `You have used your budget of ${counted(detail.budget, unit)} ${span}${resets}`;
  }
  return `You have used ${count(detail.used)} of your budget of ${counted(detail.budget, unit)} ${span}${resets}`;
}

/** "3 turns a day · 100,000 tokens a month", or "" when nothing is limited. */
function limitWords(budget) {
  return LIMITS.filter(([name]) => budget && budget[name])
    .map(([name]) => `${counted(budget[name], LIMIT_WORDS[name][0])} ${LIMIT_WORDS[name][1]}`)
    .join(" · ");
}

function untilWords(iso) {
  const minutes = Math.max(0, Math.round((new Date(iso).getTime() - Date.now()) / 60000));
  if (minutes < 60) return `in ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `in ${hours} h ${minutes % 60} min`;
  return `in ${Math.round(hours / 24)} days`;
}

/** One line of a budget: "2 of 3" with a bar and what is left, or the count alone; an
 * earlier period's count is what was spent, measured against no budget of today's. */
function meter(name, label, used, limit, remaining, past) {
  const row = el(
    "div",
    { class: "meter", dataset: { meter: name, used: String(used || 0) } },
    el("span", { class: "meter-label" }, label),
    el("span", { class: "meter-words" }, limit && !past ? `${count(used)} of ${count(limit)}` : count(used)),
    el("span", { class: "meter-left" }, past ? "spent" : limit ? `${count(remaining)} left` : "no budget"),
  );
  if (limit && !past) {
    const share = Math.min(1, Number(used || 0) / Number(limit));
    const fill = el("span", { class: "bar-fill" });
    fill.style.width = `${Math.round(share * 100)}%`; // CSSOM: the page's CSP allows no style attribute
    row.append(
      el(
        "span",
        {
          class: `bar${share >= 1 ? " full" : share >= 0.8 ? " near" : ""}`,
          role: "meter",
          "aria-label": `${label}: ${count(used)} of ${count(limit)}`,
          "aria-valuemin": "0",
          "aria-valuemax": String(limit),
          "aria-valuenow": String(Math.min(Number(used || 0), Number(limit))),
        },
        fill,
      ),
    );
  }
  return row;
}

function tokenSplit(usage) {
  const pairs = [
    ["Input", count(usage.inputTokens)],
    ["Output", count(usage.outputTokens)],
    ["Cache read", count(usage.cacheReadTokens)],
    ["Cache write", count(usage.cacheWriteTokens)],
  ];
  if (usage.toolRounds !== undefined) pairs.push(["Tool rounds", count(usage.toolRounds)]);
  if (usage.calls !== undefined) pairs.push(["Model calls", count(usage.calls)]);
  pairs.push(["Models", (usage.models || []).join(", ") || "none"]);
  return el(
    "dl",
    { class: "usage-split" },
    pairs.map(([term, value]) => el("div", {}, el("dt", {}, term), el("dd", {}, value))),
  );
}

function mine(answer, past) {
  const limits = answer.period === "month" ? ["turnsPerMonth", "tokensPerMonth"] : ["turnsPerDay", "tokensPerDay"];
  const budget = answer.budget || {};
  const remaining = answer.remaining || {};
  const usage = answer.usage;
  return el(
    "div",
    { class: "usage-mine", dataset: { turns: String(usage.turns), tokens: String(usage.totalTokens) } },
    meter("turns", "Turns", usage.turns, budget[limits[0]], remaining.turns, past),
    meter("tokens", "Tokens", usage.totalTokens, budget[limits[1]], remaining.tokens, past),
    tokenSplit(usage),
    el(
      "p",
      { class: "meta" },
      limitWords(answer.budget)
        ? `Your budget in this project${past ? " now" : ""}: ${limitWords(answer.budget)}.`
        : "You have no budget in this project.",
    ),
  );
}

function budgetForm(projectId, member, reload) {
  const id = (name) => `budget-${name}-${member.userId}`;
  const inputs = LIMITS.map(([name, label]) => {
    // step any: a value the API refuses (0, 2.5) reaches it and is answered in its words.
    const input = el("input", { id: id(name), name, type: "number", step: "any", inputmode: "numeric" });
    input.value = member.budget && member.budget[name] ? String(member.budget[name]) : "";
    return [el("label", { for: id(name) }, label), input];
  });
  const problem = el("p", { class: "error-words", role: "alert", hidden: true });
  const form = el(
    "form",
    { class: "budget-form" },
    el("p", { class: "hint" }, "Empty is no limit."),
    el("div", { class: "budget-fields" }, inputs.flat()),
    problem,
    el(
      "div",
      { class: "row" },
      el("button", { type: "submit", class: "primary" }, "Save budget"),
      el("button", { type: "button", onclick: () => save({}) }, "No limits"),
    ),
  );
  async function save(body) {
    problem.hidden = true;
    try {
      await send("PUT", `/projects/${enc(projectId)}/members/${enc(member.userId)}/budget`, body);
    } catch (error) {
      problem.textContent = `Not saved: ${error instanceof ApiError ? error.words : error.message}`;
      problem.hidden = false;
      return;
    }
    showNote(`${member.userId}'s budget is saved.`);
    await reload();
    // The list is drawn anew: focus returns to this member's budget, not the page's body.
    const again = document.querySelector(`#usage-members li[data-user="${CSS.escape(member.userId)}"] summary`);
    (again || $("usage-title")).focus();
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = {};
    for (const [name] of LIMITS) {
      const value = form.elements[name].value.trim();
      body[name] = value === "" ? null : Number(value);
    }
    save(body);
  });
  return form;
}

function members(answer, projectId, userId, reload) {
  return el(
    "ul",
    { class: "usage-members", id: "usage-members" },
    answer.members.map((member) =>
      el(
        "li",
        { dataset: { user: member.userId, turns: String(member.usage.turns), tokens: String(member.usage.totalTokens) } },
        el(
          "div",
          { class: "usage-member" },
          el("strong", { class: "member" }, member.userId, member.userId === userId ? " (you)" : ""),
          el("span", { class: "badge" }, member.role),
        ),
        el("p", { class: "meta" }, `${counted(member.usage.turns, "turns")} · ${counted(member.usage.totalTokens, "tokens")} · ${limitWords(member.budget) ? `budget: ${limitWords(member.budget)}` : "no budget"}`),
        el(
          "details",
          { class: "budget-edit" },
          el("summary", { "aria-label": `Budget of ${member.userId}` }, "Set budget"),
          budgetForm(projectId, member, reload),
        ),
      ),
    ),
  );
}

function upkeep(answer) {
  const total = answer.upkeep.total;
  return el(
    "div",
    { class: "upkeep", dataset: { tokens: String(total.totalTokens), calls: String(total.calls) } },
    el(
      "p",
      {},
      `Extracting, summarizing and consolidating memory used ${counted(total.totalTokens, "tokens")} in ${counted(total.calls, "model calls")}.`,
    ),
    el(
      "ul",
      { class: "upkeep-jobs" },
      JOBS.map(([name, label]) => {
        const job = answer.upkeep.jobs[name] || {};
        return el("li", { dataset: { job: name } }, `${label}: ${counted(job.totalTokens, "tokens")}, ${counted(job.calls, "calls")}`);
      }),
    ),
    el("details", {}, el("summary", {}, "Upkeep tokens by kind"), tokenSplit(total)),
  );
}

/** The switch, the steps, the heading and "Back to …" for the period about to be shown. */
function showControls() {
  const { period, date } = shown;
  const at = date || current(period);
  const unit = period === "day" ? "day" : "month";
  for (const button of document.querySelectorAll("#usage-period [data-period]")) {
    button.setAttribute("aria-pressed", String(button.dataset.period === period));
  }
  $("usage-earlier").setAttribute("aria-label", `Earlier ${unit}: ${dateWords(period, step(period, at, -1))}`);
  const now = period === "day" ? "today" : "this month";
  const next = step(period, at, 1);
  const later = $("usage-later");
  later.disabled = date === null; // no future: the current period is the latest
  later.setAttribute(
    "aria-label",
    `Later ${unit}: ${date === null ? `none, this is ${now}` : next >= current(period) ? now : dateWords(period, next)}`,
  );
  const back = $("usage-back");
  back.hidden = date === null;
  back.textContent = period === "day" ? "Back to today" : "Back to this month";
  $("usage-shown").textContent = periodWords(period, at, date === null);
}

/** The line under the heading: when the current period resets, or that an earlier one is
 * only what was spent then, with budgets that are today's. */
function whenLine(answer, past) {
  const that = answer.period === "month" ? "that month" : "that day";
  return el(
    "p",
    { class: "meta usage-when", dataset: { period: answer.period, date: answer.date, current: String(!past) } },
    past
      ? `What was spent ${that}. Budgets are the current ones: they apply from now on, not to ${that}.`
      : `Resets ${when(answer.resetsAt)} (${untilWords(answer.resetsAt)}).`,
  );
}

/** Load and show the usage of `project` for the chosen period. */
export async function loadUsage(project, userId) {
  const box = $("usage-view");
  if (shown.project !== project.id) {
    shown.project = project.id;
    shown.date = null; // another project opens on the current period
  }
  shown.asked += 1;
  const { asked, period, date } = shown;
  showControls();
  box.setAttribute("aria-busy", "true");
  let answer;
  try {
    answer = await get(`/projects/${enc(project.id)}/usage?period=${period}${date ? `&date=${enc(date)}` : ""}`);
  } catch (error) {
    if (asked !== shown.asked) return;
    box.removeAttribute("aria-busy");
    box.replaceChildren(el("p", { class: "error-words" }, `Could not load usage: ${error instanceof ApiError ? error.words : error.message}`));
    return;
  }
  if (asked !== shown.asked) return; // a later load answers instead
  box.removeAttribute("aria-busy");
  const past = date !== null;
  if (!past && answer.period === "day") {
    shown.today = answer.date;
    shown.thisMonth = answer.date.slice(0, 7);
  } else if (!past) {
    shown.thisMonth = answer.date;
    if (shown.today && shown.today.slice(0, 7) !== answer.date) shown.today = null;
  }
  $("usage-shown").textContent = periodWords(answer.period, answer.date, !past);
  const reload = () => loadUsage(project, userId);
  box.replaceChildren(
    whenLine(answer, past),
    mine(answer, past),
    ...(answer.members
      ? [el("h4", {}, past ? "Each member then, and their budget now" : "Each member, and their budget"), members(answer, project.id, userId, reload)]
      : []),
    el("h4", {}, "Memory upkeep"),
    upkeep(answer),
  );
}

/** Move `by` periods (UTC), never past the current one, which is asked without a date. */
function stepBy(by) {
  const to = step(shown.period, shown.date || current(shown.period), by);
  shown.date = to >= current(shown.period) ? null : to;
}

/** Day ↔ month, staying in the same place: a day goes to its month; a month goes to its
 * last day, or to today when it is the current month. */
function switchTo(period) {
  if (period === shown.period) return;
  const { date } = shown;
  shown.period = period;
  if (date === null) return;
  const to = period === "month" ? date.slice(0, 7) : lastDay(date);
  shown.date = to >= current(period) ? null : to;
}

/** The Day / Month switch, Earlier, Later and Back; `reload` shows the usage again. */
export function wireUsage(reload) {
  for (const button of document.querySelectorAll("#usage-period [data-period]")) {
    button.addEventListener("click", () => {
      switchTo(button.dataset.period);
      reload();
    });
  }
  $("usage-earlier").addEventListener("click", () => {
    stepBy(-1);
    reload();
  });
  $("usage-later").addEventListener("click", () => {
    stepBy(1);
    reload();
  });
  $("usage-back").addEventListener("click", () => {
    shown.date = null;
    reload();
    $("usage-earlier").focus(); // Back hides itself; focus stays in the panel
  });
}
