// Package sqs reads the interruption queue: the SQS queue that EventBridge
// rules fill with EC2 spot interruption warnings, rebalance
// recommendations, instance state changes and AWS Health scheduled
// changes (Karpenter's settings.interruptionQueue; docs/interruption.md
// lists the rules).
//
// A Provider resolves the queue's URL once (GetQueueUrl, again after
// AWS.SimpleQueueService.NonExistentQueue), long-polls it (ReceiveMessage
// with WaitTimeSeconds 20 and MaxNumberOfMessages 10, the most SQS allows)
// and deletes handled messages by receipt handle (DeleteMessage). These
// three actions are all the IAM policy grants on the queue's ARN.
// OwnerAccount reads the queue owner's account id from the URL, which the
// interruption controller requires every message's account to equal.
//
// Every call goes through ec2api.SQSAPI, its own SDK client with its own
// retryer, so a throttled or failing queue cannot use up the EC2 client's
// retry quota; SQS has no per-action request quota for standard queues
// (Amazon SQS Developer Guide, "Amazon SQS quotas"), so no client-side
// budget applies: the one long poll at a time is the rate.
package sqs
