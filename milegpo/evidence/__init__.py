"""The ground-truth tools: how well credit methods rank steps against what the worlds know, and the statistics
over seeds the method comparisons report.

- :mod:`.labelled`: episodes played in-process with the world's steps-to-win before and after every action
  (:class:`~.labelled.LabelledBatch`; a mixed expert's batches, or a saved policy's through the job);
- :mod:`.quality`: ``milegpo credit-quality``, the same-state / group AUCs and tied-pair accuracy of every
  credit method on labelled batches, with bootstrap intervals over task groups;
- :mod:`.milestones`: milestone truth, whether each method's step scores (MileGPO's milestone and trap scores,
  GraphGPO's progress, the others' step terms) rank the steps that completed one of the world's subgoals above
  the others (docs/milestone_truth.md);
- :mod:`.ranking`: the tie rule and the bootstrap over task groups both share;
- :mod:`.seed_stats`: t-intervals over seeds, paired tests, the seeds a difference needs.

The package sits above the job: it plays saved policies with ``milegpo train``'s own flags and trainer
(:func:`~.labelled.play_checkpoint`) and picks each world's preset as the job does.
"""
