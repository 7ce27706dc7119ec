// Live captions: the reply's words as the server timed them, the word being heard highlighted.
//
// A speak stream's `words` event holds one sentence's words in seconds of that sentence's audio
// and `offset_s`, where the sentence starts in the reply's audio; so every word has a place on
// the reply's timeline (offset_s + start_s). The player reports how much audio it has actually
// played (samples out of the AudioWorklet, or the <audio> element's currentTime); the word whose
// span holds that position is the one being heard. At a barge-in, `heard(position)` says which
// words the listener heard: every word whose start was played.

export class Captions {
  // `element`: where the words are shown (its contents are replaced).
  constructor(element) {
    this.element = element;
    this.words = []; // {word, start_s, end_s, index, node}, on the reply's timeline, in order
    this.current = -1;
    this.log = []; // {index, position_s} each time the highlight moved: for people and tests
  }

  reset() {
    this.words = [];
    this.current = -1;
    this.log = [];
    this.element.replaceChildren();
  }

  // One `words` event of the speak stream.
  add(event) {
    const offset = Number(event.offset_s) || 0;
    for (const word of event.words || []) {
      const node = document.createElement('span');
      node.className = 'caption-word';
      node.textContent = word.word;
      if (this.words.length) this.element.append(' ');
      this.element.append(node);
      this.words.push({
        word: word.word,
        start_s: offset + word.start_s,
        end_s: offset + word.end_s,
        index: event.index,
        node,
      });
    }
  }

  // The playback position moved to `positionS` seconds of the reply's audio.
  update(positionS) {
    let current = -1;
    for (let i = 0; i < this.words.length; i++) {
      if (this.words[i].start_s > positionS) break;
      current = i;
    }
    if (current === this.current) return;
    if (this.current >= 0) this.words[this.current].node.removeAttribute('aria-current');
    for (let i = Math.max(this.current, 0); i <= current; i++) this.words[i].node.classList.add('heard');
    this.current = current;
    if (current >= 0) {
      this.words[current].node.setAttribute('aria-current', 'true');
      this.log.push({ index: current, position_s: positionS });
    }
  }

  // The words whose start was played by `positionS` (what a listener heard before a barge-in).
  heard(positionS) {
    return this.words.filter((word) => word.start_s < positionS).map(({ word, start_s, end_s, index }) => ({
      word,
      start_s,
      end_s,
      sentence: index,
      complete: end_s <= positionS,
    }));
  }

  // Plain data (no DOM nodes), for window.voicestream.
  snapshot() {
    return {
      words: this.words.map(({ word, start_s, end_s, index }) => ({ word, start_s, end_s, sentence: index })),
      current: this.current,
      log: this.log,
    };
  }
}
