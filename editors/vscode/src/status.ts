// The status-bar item: whether the server runs, the conversions running now, and the best
// speedup a correct conversion reached in this session. It follows the server's
// `$/drtriton/conversion` notifications (one per job state: queued, running, done, cancelled,
// failed).
import * as vscode from 'vscode';

export interface Conversion {
    job: number;
    uri: string;
    className: string;
    output: string | null;
    state: 'queued' | 'running' | 'done' | 'cancelled' | 'failed';
    correct: boolean;
    summary: string | null;
}

interface Best {
    conversion: Conversion;
    speedup?: number; // vs eager; absent where speed is not measured (no GPU)
}

// The verdict's summary says "1.85x vs eager" when the speed was measured (drtriton.verify.Verdict).
const SPEEDUP = /([0-9.]+)x vs eager/;

export class StatusItem implements vscode.Disposable {
    private readonly item = vscode.window.createStatusBarItem('drtriton.status', vscode.StatusBarAlignment.Left, 10);
    private readonly active = new Map<number, Conversion>();
    private best?: Best;
    private server: 'starting' | 'running' | 'stopped' = 'starting';

    constructor() {
        this.item.name = 'DRTriton';
        this.render();
        this.item.show();
    }

    setServer(state: 'starting' | 'running' | 'stopped'): void {
        this.server = state;
        if (state !== 'running') {
            this.active.clear(); // a new server process starts with no jobs
        }
        this.render();
    }

    update(c: Conversion): void {
        if (c.state === 'queued' || c.state === 'running') {
            this.active.set(c.job, c);
        } else {
            this.active.delete(c.job);
        }
        if (c.state === 'done' && c.correct) {
            const match = SPEEDUP.exec(c.summary ?? '');
            const speedup = match ? Number(match[1]) : undefined;
            if (!this.best || (speedup ?? 0) >= (this.best.speedup ?? 0)) {
                this.best = { conversion: c, speedup };
            }
        }
        this.render();
    }

    private render(): void {
        const running = [...this.active.values()];
        const parts = [this.server === 'stopped' ? '$(error)' : '$(zap)', 'DRTriton'];
        if (this.server === 'starting') {
            parts.push('$(loading~spin)');
        }
        if (running.length) {
            parts.push(`$(sync~spin) ${running.length}`);
        }
        if (this.best?.speedup !== undefined) {
            parts.push(`${this.best.speedup.toFixed(2)}x`);
        } else if (this.best) {
            parts.push('$(check)');
        }
        this.item.text = parts.join(' ');
        // the icons in words, for screen readers (and the end-to-end test, which reads it)
        const words = [`DRTriton: server ${this.server}`, `${running.length} running`];
        if (this.best) {
            words.push(`best ${this.best.conversion.className}: ` + (this.best.speedup !== undefined
                ? `${this.best.speedup.toFixed(2)}x vs eager` : 'correct, speed not measured'));
        }
        this.item.accessibilityInformation = { label: words.join(', ') };

        const tooltip = new vscode.MarkdownString(`**DRTriton** · server ${this.server}\n\n`);
        for (const c of running) {
            tooltip.appendMarkdown(`- converting \`${c.className}\` (${c.state})\n`);
        }
        if (this.best) {
            const b = this.best.conversion;
            tooltip.appendMarkdown(`\nBest: \`${b.className}\`: ${b.summary ?? 'correct'}\n\nClick for its report.`);
            this.item.command = { title: 'Show report', command: 'drtriton.showReport', arguments: [b.uri, b.className] };
        } else {
            this.item.command = 'drtriton.showOutput';
        }
        this.item.tooltip = tooltip;
    }

    dispose(): void {
        this.item.dispose();
    }
}
