// Usage and budgets in the project panel: the caller's tokens and turns for today or this
// month beside their budget and what remains, every member's for an owner (each with a
// small form to set or clear their budget), and memory upkeep, the background jobs' model
// usage. A turn refused for budget is said in the same words in the chat.
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

const shown = { period: "day", asked: 0 };

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

/** One line of a budget: "2 of 3" with a bar and what is left, or the count alone. */
function meter(name, label, used, limit, remaining) {
  const row = el(
    "div",
    { class: "meter", dataset: { meter: name, used: String(used || 0) } },
    el("span", { class: "meter-label" }, label),
    el("span", { class: "meter-words" }, limit ? `${count(used)} of ${count(limit)}` : count(used)),
    el("span", { class: "meter-left" }, limit ? `${count(remaining)} left` : "no budget"),
  );
  if (limit) {
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

function mine(answer) {
  const limits = answer.period === "month" ? ["turnsPerMonth", "tokensPerMonth"] : ["turnsPerDay", "tokensPerDay"];
  const budget = answer.budget || {};
  const remaining = answer.remaining || {};
  const usage = answer.usage;
  return el(
    "div",
    { class: "usage-mine", dataset: { turns: String(usage.turns), tokens: String(usage.totalTokens) } },
    meter("turns", "Turns", usage.turns, budget[limits[0]], remaining.turns),
    meter("tokens", "Tokens", usage.totalTokens, budget[limits[1]], remaining.tokens),
    tokenSplit(usage),
    el("p", { class: "meta" }, limitWords(answer.budget) ? `Your budget in this project: ${limitWords(answer.budget)}.` : "You have no budget in this project."),
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
    reload();
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

/** Load and show the usage of `project` for the chosen period. */
export async function loadUsage(project, userId) {
  const box = $("usage-view");
  shown.asked += 1;
  const asked = shown.asked;
  for (const button of document.querySelectorAll("#usage-period [data-period]")) {
    button.setAttribute("aria-pressed", String(button.dataset.period === shown.period));
  }
  let answer;
  try {
    answer = await get(`/projects/${enc(project.id)}/usage?period=${shown.period}`);
  } catch (error) {
    if (asked !== shown.asked) return;
    box.replaceChildren(el("p", { class: "error-words" }, `Could not load usage: ${error instanceof ApiError ? error.words : error.message}`));
    return;
  }
  if (asked !== shown.asked) return; // a later load answers instead
  const reload = () => loadUsage(project, userId);
  const period = answer.period === "month" ? "This month" : "Today";
  box.replaceChildren(
    el(
      "p",
      { class: "meta usage-when", dataset: { period: answer.period, date: answer.date } },
      `${period} (${answer.date}, UTC) · resets ${when(answer.resetsAt)} (${untilWords(answer.resetsAt)})`,
    ),
    mine(answer),
    ...(answer.members ? [el("h4", {}, "Each member, and their budget"), members(answer, project.id, userId, reload)] : []),
    el("h4", {}, "Memory upkeep"),
    upkeep(answer),
  );
}

/** The Today / This month switch; `reload` shows the usage again for the one chosen. */
export function wireUsage(reload) {
  for (const button of document.querySelectorAll("#usage-period [data-period]")) {
    button.addEventListener("click", () => {
      shown.period = button.dataset.period;
      reload();
    });
  }
}
